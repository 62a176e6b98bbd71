// Package peer runs other prompt-injection guards, published as npm
// packages, over the same texts as the embedded guard, so that `aegis
// eval --peers` can print them side by side. The packages are installed
// with npm into a cache directory outside the source tree and run by a
// small Node program (runner.mjs) that reads one JSON text per line and
// answers with a score and the package's own verdict.
package peer

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

//go:embed runner.mjs
var runner []byte

// Spec is one peer: the name runner.mjs knows it by, the npm package and
// version installed for it, and what is measured.
type Spec struct {
	Name, Package, Version, What string
}

// Peers are the guards compared: llm_guardrail (TF-IDF and logistic
// regression; its default check, and its combined check of three models)
// and vard (rules).
var Peers = []Spec{
	{Name: "llm_guardrail", Package: "llm_guardrail", Version: "2.1.2", What: "check(): its prompt-injection model"},
	{Name: "llm_guardrail-all", Package: "llm_guardrail", Version: "2.1.2", What: "checkAll(): injection, jailbreak and malicious models, flagged when any flags"},
	{Name: "vard", Package: "@andersmyrmel/vard", Version: "1.2.0", What: "vard.safe() with the default configuration; score: highest threat severity"},
}

// ErrNoNode is returned (wrapped) when node or npm is not on PATH.
var ErrNoNode = errors.New("node and npm are needed to run the npm guards")

// CacheDir is where the peers are installed: $AEGIS_PEERS_CACHE, else
// aegis-peers under the user's cache directory ($XDG_CACHE_HOME or
// ~/.cache).
func CacheDir() (string, error) {
	if d := os.Getenv("AEGIS_PEERS_CACHE"); d != "" {
		return d, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("peer: %w", err)
	}
	return filepath.Join(d, "aegis-peers"), nil
}

// installed reports whether dir holds spec's package at spec's version.
func installed(dir string, spec Spec) bool {
	b, err := os.ReadFile(filepath.Join(dir, "node_modules", filepath.FromSlash(spec.Package), "package.json"))
	if err != nil {
		return false
	}
	var p struct {
		Version string `json:"version"`
	}
	return json.Unmarshal(b, &p) == nil && p.Version == spec.Version
}

// Install makes sure every peer is installed in dir (running npm install
// for those missing, its output to log) and writes the runner there.
func Install(ctx context.Context, dir string, log io.Writer) error {
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("peer: %s: %w", tool, ErrNoNode)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("peer: %w", err)
	}
	var missing []string
	for _, s := range Peers {
		if p := s.Package + "@" + s.Version; !installed(dir, s) && !slices.Contains(missing, p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(log, "installing %s into %s\n", strings.Join(missing, " "), dir)
		cmd := exec.CommandContext(ctx, "npm", append([]string{"install", "--no-audit", "--no-fund", "--silent", "--prefix", dir}, missing...)...)
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("peer: npm install %s: %w", strings.Join(missing, " "), err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "runner.mjs"), runner, 0o644); err != nil {
		return fmt.Errorf("peer: %w", err)
	}
	return nil
}

// Scorer is one running peer. It implements eval.Scorer; the head is
// ignored (each peer has one verdict). Calls are serialised.
type Scorer struct {
	name string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	mu   sync.Mutex
	dead error
}

// Start runs the peer name from dir (prepared by Install). The process
// ends with ctx or Close.
func Start(ctx context.Context, dir, name string) (*Scorer, error) {
	return start(ctx, dir, name, "node", filepath.Join(dir, "runner.mjs"), name)
}

func start(ctx context.Context, dir, name string, argv ...string) (*Scorer, error) {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", name, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("peer %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("peer %s: %w", name, err)
	}
	return &Scorer{name: name, cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10)}, nil
}

// Name is the peer's name.
func (s *Scorer) Name() string { return s.name }

// maxAnswer bounds one answer line.
const maxAnswer = 1 << 20

// Score sends text to the peer and reads its verdict.
func (s *Scorer) Score(_ context.Context, text, _ string) (float64, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead != nil {
		return 0, false, s.dead
	}
	req, err := json.Marshal(struct {
		Text string `json:"text"`
	}{text})
	if err != nil {
		return 0, false, fmt.Errorf("peer %s: %w", s.name, err)
	}
	if _, err := s.in.Write(append(req, '\n')); err != nil {
		s.dead = fmt.Errorf("peer %s: write: %w", s.name, err)
		return 0, false, s.dead
	}
	line, err := readLine(s.out, maxAnswer)
	if err != nil {
		s.dead = fmt.Errorf("peer %s: read: %w", s.name, err)
		return 0, false, s.dead
	}
	var a struct {
		Score *float64 `json:"score"`
		Flag  bool     `json:"flag"`
		Error string   `json:"error"`
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return 0, false, fmt.Errorf("peer %s: answer %.80q: %w", s.name, line, err)
	}
	if a.Error != "" {
		return 0, false, fmt.Errorf("peer %s: %s", s.name, a.Error)
	}
	if a.Score == nil {
		return 0, false, fmt.Errorf("peer %s: answer %.80q has no score", s.name, line)
	}
	return *a.Score, a.Flag, nil
}

// readLine reads one newline-terminated line of at most max bytes.
func readLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max {
			return nil, fmt.Errorf("answer longer than %d bytes", max)
		}
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return nil, fmt.Errorf("answer cut short: %w", io.ErrUnexpectedEOF)
		default:
			return nil, err
		}
	}
}

// Close ends the peer process and waits for it.
func (s *Scorer) Close() error {
	s.in.Close()
	err := s.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Errorf("peer %s: %w", s.name, err)
	}
	return err
}

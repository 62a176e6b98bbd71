package sweep

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aegis-sentinel/aegis/internal/llamaproc"
	"github.com/aegis-sentinel/aegis/internal/llamaserver"
)

// Engine names a binary and how to start it.
type Engine struct {
	Path string
	Env  []string // added to the process environment (before a set's own Env)
}

func (e Engine) command(ctx context.Context, env, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.Path, args...)
	cmd.Env = append(append(os.Environ(), e.Env...), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stop the wrapper and its children together
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// BenchOptions are the llama-bench test sizes.
type BenchOptions struct {
	Reps, Prompt, Gen int // -r, -p, -n
}

// RunBench runs llama-bench on model with the set's flags and returns its
// rows.
func RunBench(ctx context.Context, e Engine, model string, s Set, o BenchOptions) ([]BenchRow, error) {
	args := []string{"-m", model, "-o", "json",
		"-r", strconv.Itoa(max(o.Reps, 1)), "-p", strconv.Itoa(o.Prompt), "-n", strconv.Itoa(o.Gen)}
	args = append(append(args, s.Flags...), s.BenchFlags...)
	cmd := e.command(ctx, s.Env, args)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{buf: &stderr, max: 64 << 10}
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("sweep: set %s: llama-bench %s: %w: %s", s.Name, strings.Join(args, " "), err, tail(stderr.String(), 600))
	}
	rows, err := ParseBenchJSON(out)
	if err != nil {
		return nil, fmt.Errorf("sweep: set %s: %w", s.Name, err)
	}
	return rows, nil
}

// ServerOptions control a llama-server run.
type ServerOptions struct {
	Prompt      string        // the fixed prompt for the time-to-first-token request
	LoadTimeout time.Duration // until /health answers 200; 0 = 2 minutes
	LogFlags    []string      // flags that make llama-server print buffer sizes; nil = -lv 4
}

// ServerResult is what one llama-server run measured.
type ServerResult struct {
	Load        LoadLog       `json:"load"`
	LoadTime    time.Duration `json:"load_ns"`
	TTFT        time.Duration `json:"ttft_ns"` // request sent to first streamed token
	PromptN     int           `json:"prompt_n"`
	PromptMS    float64       `json:"prompt_ms"`
	PredictedPS float64       `json:"predicted_per_second"`
}

// RunServer starts llama-server with model and the set's flags on a free
// loopback port, waits for it to load, reads the buffer sizes from its log,
// measures the time to the first token of one streamed completion of the
// fixed prompt, and stops it.
func RunServer(ctx context.Context, e Engine, model string, s Set, o ServerOptions) (*ServerResult, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logFlags := o.LogFlags
	if logFlags == nil {
		logFlags = []string{"-lv", "4"}
	}
	// The set's flags pin the device, so the launch pins none.
	l := llamaproc.Launch{Binary: e.Path, Model: model, Port: port, Env: append(slices.Clone(e.Env), s.Env...),
		Args: append(append(slices.Clone(logFlags), s.Flags...), s.ServerFlags...)}
	args, _ := l.Command()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	start := time.Now()
	proc, err := llamaproc.ExecStarter(ctx, l.Spec(func(line string) {
		logMu.Lock()
		if logBuf.Len() < 8<<20 {
			logBuf.WriteString(line)
			logBuf.WriteByte('\n')
		}
		logMu.Unlock()
	}))
	if err != nil {
		return nil, fmt.Errorf("sweep: set %s: start llama-server: %w", s.Name, err)
	}
	exited := proc.Done()
	stop := func() { llamaproc.Stop(proc, 5*time.Second) }
	logText := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return logBuf.String()
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	timeout := o.LoadTimeout
	if timeout == 0 {
		timeout = 2 * time.Minute
	}
	if err := waitHealthy(ctx, base, timeout, exited); err != nil {
		stop()
		if errors.Is(err, errExited) {
			err = fmt.Errorf("%w (%v)", err, proc.Err())
		}
		return nil, fmt.Errorf("sweep: set %s: llama-server %s: %w: %s", s.Name, strings.Join(args, " "), err, tail(logText(), 800))
	}
	res := &ServerResult{LoadTime: time.Since(start)}
	if err := firstToken(ctx, base, o.Prompt, res); err != nil {
		stop()
		return nil, fmt.Errorf("sweep: set %s: %w", s.Name, err)
	}
	stop()
	res.Load = ParseLoadLog(strings.NewReader(logText()))
	return res, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("sweep: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

var errExited = errors.New("exited while loading")

// The sweep's clients for llama-server: the completion client resends a
// POST that met one of the server's closed keep-alive connections.
var (
	healthClient     = llamaserver.NewClient(2 * time.Second)
	completionClient = llamaserver.NewClient(2 * time.Minute)
)

func waitHealthy(ctx context.Context, base string, timeout time.Duration, exited <-chan struct{}) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	client := healthClient
	for {
		select {
		case <-exited:
			return errExited
		case <-deadline.C:
			return fmt.Errorf("not healthy after %s", timeout)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/health", nil)
			resp, err := client.Do(req)
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
}

// firstToken streams one /completion of prompt (16 tokens, greedy, no
// prompt cache) and records the time from sending to the first token and
// the server's own timings.
func firstToken(ctx context.Context, base, prompt string, res *ServerResult) error {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": 16, "stream": true,
		"temperature": 0, "cache_prompt": false})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/completion", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	client := completionClient
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("completion: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("completion: HTTP %d: %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Content string `json:"content"`
			Stop    bool   `json:"stop"`
			Timings *struct {
				PromptN     int     `json:"prompt_n"`
				PromptMS    float64 `json:"prompt_ms"`
				PredictedPS float64 `json:"predicted_per_second"`
			} `json:"timings"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		if res.TTFT == 0 && (ev.Content != "" || ev.Stop) {
			res.TTFT = time.Since(t0)
		}
		if ev.Timings != nil {
			res.PromptN, res.PromptMS, res.PredictedPS = ev.Timings.PromptN, ev.Timings.PromptMS, ev.Timings.PredictedPS
		}
		if ev.Stop {
			return nil
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("completion stream: %w", err)
	}
	if res.TTFT == 0 {
		return errors.New("completion stream ended without a token")
	}
	return nil
}

type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

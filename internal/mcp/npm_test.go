package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// The tests in this file drive the real parts: the reference servers
// @modelcontextprotocol/server-everything and server-filesystem, a server
// written with the TypeScript SDK that behaves like the published
// tool-poisoning attacks, and the TypeScript SDK's client, installed by
// scripts/mcp-parts into a cache outside the repository. They need node
// and npm; with AEGIS_REQUIRE_TESTBED=1 (make test) their absence fails.

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
	partsMu sync.Mutex
	parts   string
)

func repoRoot(t *testing.T) string {
	t.Helper()
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = up
	}
}

// npmParts returns the cache holding the MCP parts, installing them once.
func npmParts(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("real MCP parts: not in -short")
	}
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("AEGIS_REQUIRE_TESTBED") == "1" {
			t.Fatal("node is needed for the real MCP parts")
		}
		t.Skip("node not installed")
	}
	partsMu.Lock()
	defer partsMu.Unlock()
	if parts == "" {
		out, err := exec.Command(filepath.Join(repoRoot(t), "scripts", "mcp-parts")).Output()
		if err != nil {
			if os.Getenv("AEGIS_REQUIRE_TESTBED") == "1" {
				t.Fatalf("scripts/mcp-parts: %v", err)
			}
			t.Skipf("scripts/mcp-parts: %v", err)
		}
		parts = strings.TrimSpace(string(out))
	}
	return parts
}

// aegisBin builds the aegis binary once per test run.
func aegisBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "aegis-mcp-test")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "aegis")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/aegis")
		cmd.Dir = repoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// transcript is what the client saw: every message it received, and the
// outcome of every step of the scenario.
type transcript struct {
	Received []json.RawMessage `json:"received"`
	Steps    []json.RawMessage `json:"steps"`
}

// runClient runs the TypeScript SDK client with args and env.
func runClient(t *testing.T, cache string, env []string, args ...string) (transcript, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", append([]string{filepath.Join(cache, "client.mjs")}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = cache
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client %v: %v\n%s", args, err, stderr.String())
	}
	var tr transcript
	if err := json.Unmarshal(out, &tr); err != nil {
		t.Fatalf("client output: %v\n%s\n%s", err, out, stderr.String())
	}
	return tr, stderr.String()
}

var (
	clockTime = regexp.MustCompile(`\b\d{1,2}:\d{2}:\d{2}( ?[AP]M)?\b`)
	uuid      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
)

// normalize removes what differs between two runs of the same scenario
// whoever is in the middle: clock times (also inside base64 blobs),
// session ids, and the text and level of simulated log messages; and it
// folds repeats of one notification (their number depends on timing).
func normalize(msgs []json.RawMessage) []string {
	var out []string
	for _, raw := range msgs {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			out = append(out, string(raw))
			continue
		}
		if m, ok := v.(map[string]any); ok && m["method"] == "notifications/message" {
			m["params"] = "<log message>"
		}
		v = scrub(v)
		b, _ := json.Marshal(v)
		s := string(b)
		if len(out) > 0 && out[len(out)-1] == s && strings.Contains(s, `"method":"notifications/`) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// splitReceived separates the answers to the client's requests from what
// the server sent on its own.
func splitReceived(msgs []json.RawMessage) (answers, others []json.RawMessage) {
	for _, m := range msgs {
		var probe struct {
			Method string `json:"method"`
		}
		if json.Unmarshal(m, &probe) == nil && probe.Method == "" {
			answers = append(answers, m)
		} else {
			others = append(others, m)
		}
	}
	return answers, others
}

func asSet(msgs []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range msgs {
		if seen[m] && strings.Contains(m, `"method":"notifications/`) {
			continue
		}
		seen[m] = true
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

func scrub(v any) any {
	switch x := v.(type) {
	case string:
		if d, err := base64.StdEncoding.DecodeString(x); err == nil && len(x) >= 16 && utf8.Valid(d) && clockTime.Match(d) {
			return "base64:" + scrub(string(d)).(string)
		}
		return uuid.ReplaceAllString(clockTime.ReplaceAllString(x, "<time>"), "<uuid>")
	case []any:
		for i := range x {
			x[i] = scrub(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = scrub(x[k])
		}
	}
	return v
}

// sameTranscripts fails the test where the two transcripts differ. The
// answers to the client's requests come in the order it asked; what the
// server sends on its own (notifications, its requests, and on HTTP its
// GET stream) interleaves with them by timing, so those are compared as
// a set (each notification once). The steps are always in order.
func sameTranscripts(t *testing.T, direct, proxied transcript) {
	t.Helper()
	da, dn := splitReceived(direct.Received)
	pa, pn := splitReceived(proxied.Received)
	for _, part := range []struct {
		name string
		a, b []string
	}{
		{"answers", normalize(da), normalize(pa)},
		{"server messages", asSet(normalize(dn)), asSet(normalize(pn))},
		{"steps", normalize(direct.Steps), normalize(proxied.Steps)},
	} {
		a, b := part.a, part.b
		n := max(len(a), len(b))
		diffs := 0
		for i := 0; i < n && diffs < 5; i++ {
			var x, y string
			if i < len(a) {
				x = a[i]
			}
			if i < len(b) {
				y = b[i]
			}
			if x != y {
				diffs++
				t.Errorf("%s[%d] differs:\n direct:  %.600s\n proxied: %.600s", part.name, i, x, y)
			}
		}
		if len(a) != len(b) {
			t.Errorf("%s: %d messages directly, %d through aegis", part.name, len(a), len(b))
		}
	}
}

func TestDifferentialEverythingStdio(t *testing.T) {
	cache := npmParts(t)
	bin := aegisBin(t)
	everything := filepath.Join(cache, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	direct, _ := runClient(t, cache, nil, "stdio", "node", everything, "stdio")
	db := filepath.Join(t.TempDir(), "incidents.db")
	proxied, stderr := runClient(t, cache, nil, "stdio", bin, "mcp", "stdio", "--name", "everything", "--incidents-db", db,
		"--log-format", "json", "--", "node", everything, "stdio")
	sameTranscripts(t, direct, proxied)
	checkFeatures(t, proxied)
	if strings.Contains(stderr, "tool flagged") {
		t.Errorf("the reference server's own tools were flagged:\n%s", grepLines(stderr, "tool flagged"))
	}
	t.Logf("server-everything over stdio: %d messages and %d steps the same directly and through aegis", len(direct.Received), len(direct.Steps))
}

// checkFeatures makes sure the scenario reached every feature (a
// transcript that failed early would compare equal too).
func checkFeatures(t *testing.T, tr transcript) {
	t.Helper()
	all := joinRaw(tr.Received)
	for _, want := range []string{`"method":"notifications/progress"`, `"method":"sampling/createMessage"`, `"method":"elicitation/create"`,
		`"method":"roots/list"`, `"method":"notifications/resources/updated"`, `"method":"notifications/message"`, `"prompts":[`,
		`"resourceTemplates":[`, `"completion":{`, `"code":-32601`} {
		if !strings.Contains(all, want) {
			t.Errorf("the client never received %s", want)
		}
	}
	steps := joinRaw(tr.Steps)
	for _, want := range []string{`{"step":"an update arrived","ok":true}`, `{"step":"a log message arrived","ok":true}`, `"step":"cancellation","error"`} {
		if !strings.Contains(steps, want) {
			t.Errorf("steps lack %s", want)
		}
	}
}

func joinRaw(msgs []json.RawMessage) string {
	var sb strings.Builder
	for _, m := range msgs {
		sb.Write(m)
		sb.WriteByte('\n')
	}
	return sb.String()
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// startProcess starts cmd and returns its stderr lines as they come; the
// process is interrupted and waited for when the test ends.
func startProcess(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	pr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1000)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		cmd.Wait()
	})
	return lines
}

func waitLine(t *testing.T, lines <-chan string, re *regexp.Regexp) []string {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l := <-lines:
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		case <-timeout:
			t.Fatalf("no line matching %s within 60s", re)
		}
	}
}

// startAegisHTTP starts aegis mcp http in front of upstream and returns
// its MCP endpoint.
func startAegisHTTP(t *testing.T, upstream, db string, extra ...string) string {
	t.Helper()
	args := append([]string{"mcp", "http", "--upstream", upstream, "--listen", "127.0.0.1:0", "--incidents-db", db, "--log-format", "json"}, extra...)
	lines := startProcess(t, exec.Command(aegisBin(t), args...))
	m := waitLine(t, lines, regexp.MustCompile(`"url":"(http://[^"]+)"`))
	return m[1]
}

func TestDifferentialEverythingHTTP(t *testing.T) {
	cache := npmParts(t)
	everything := filepath.Join(cache, "node_modules/@modelcontextprotocol/server-everything/dist/index.js")
	port := freePort(t)
	srv := exec.Command("node", everything, "streamableHttp")
	srv.Env = append(os.Environ(), "PORT="+port)
	waitLine(t, startProcess(t, srv), regexp.MustCompile(`listening on port`))
	upstream := "http://127.0.0.1:" + port + "/mcp"
	direct, _ := runClient(t, cache, nil, "http", upstream)
	proxyURL := startAegisHTTP(t, upstream, filepath.Join(t.TempDir(), "incidents.db"), "--name", "everything")
	proxied, _ := runClient(t, cache, nil, "http", proxyURL)
	sameTranscripts(t, direct, proxied)
	checkFeatures(t, proxied)
	t.Logf("server-everything over Streamable HTTP: %d messages and %d steps the same directly and through aegis", len(direct.Received), len(direct.Steps))
}

func TestDifferentialFilesystem(t *testing.T) {
	cache := npmParts(t)
	bin := aegisBin(t)
	fsJS := filepath.Join(cache, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js")
	rootA, rootB := t.TempDir(), t.TempDir()
	// The two runs use two roots with the same name length, so paths in
	// the answers differ only by the root.
	direct, _ := runClient(t, cache, []string{"MCP_SCENARIO=filesystem", "MCP_ROOT=" + rootA}, "stdio", "node", fsJS, rootA)
	proxied, stderr := runClient(t, cache, []string{"MCP_SCENARIO=filesystem", "MCP_ROOT=" + rootB}, "stdio", bin, "mcp", "stdio",
		"--incidents-db", filepath.Join(t.TempDir(), "incidents.db"), "--log-format", "json", "--", "node", fsJS, rootB)
	for i := range proxied.Received {
		proxied.Received[i] = bytes.ReplaceAll(proxied.Received[i], []byte(rootB), []byte(rootA))
	}
	for i := range proxied.Steps {
		proxied.Steps[i] = bytes.ReplaceAll(proxied.Steps[i], []byte(rootB), []byte(rootA))
	}
	sameTranscripts(t, direct, proxied)
	if !strings.Contains(joinRaw(proxied.Steps), "a note") {
		t.Error("read_text_file did not return the note")
	}
	if strings.Contains(stderr, "mcp: flagged") {
		t.Errorf("server-filesystem's own tools were flagged:\n%s", grepLines(stderr, "mcp: flagged"))
	}
}

func stepOf(t *testing.T, tr transcript, name string) map[string]any {
	t.Helper()
	for _, raw := range tr.Steps {
		var s map[string]any
		json.Unmarshal(raw, &s)
		if s["step"] == name {
			return s
		}
	}
	t.Fatalf("no step %s", name)
	return nil
}

func TestPoisonedServerThroughAegis(t *testing.T) {
	cache := npmParts(t)
	bin := aegisBin(t)
	db := filepath.Join(t.TempDir(), "incidents.db")
	calls := `[{"name":"weather","arguments":{"city":"Oslo"}},{"name":"notes","arguments":{"project":"x"}},{"name":"add","arguments":{"a":1,"b":2}},{"name":"fact","arguments":{}}]`
	run := func(rugpull string) (transcript, string) {
		return runClient(t, cache, []string{"MCP_SCENARIO=calls", "MCP_CALLS=" + calls, "MCP_RUGPULL=" + rugpull},
			"stdio", bin, "mcp", "stdio", "--name", "poisoned", "--incidents-db", db, "--log-format", "json", "--", "node", filepath.Join(cache, "poisoned.mjs"))
	}
	toolNames := func(tr transcript) string {
		s := stepOf(t, tr, "tools/list")
		var names []string
		for _, tl := range s["ok"].(map[string]any)["tools"].([]any) {
			names = append(names, tl.(map[string]any)["name"].(string))
		}
		return strings.Join(names, ",")
	}
	tr, stderr := run("0")
	if got := toolNames(tr); got != "weather,notes,fact" {
		t.Errorf("first listing: %s (add must be hidden)", got)
	}
	if s := fmt.Sprint(stepOf(t, tr, "weather")); !strings.Contains(s, "isError:true") || !strings.Contains(s, "aegis_prompt_injection") || strings.Contains(s, "credentials") {
		t.Errorf("injected result: %s", s)
	}
	if s := fmt.Sprint(stepOf(t, tr, "notes")); !strings.Contains(s, redactionMark) || strings.Contains(s, "AKIA2E3ZQF7B2LMC4XRW") {
		t.Errorf("secret in a result: %s", s)
	}
	if s := fmt.Sprint(stepOf(t, tr, "add")); !strings.Contains(s, "aegis_prompt_injection") {
		t.Errorf("call to the hidden tool: %s", s)
	}
	if !strings.Contains(stderr, `"item":"add"`) {
		t.Errorf("no warning about add:\n%s", stderr)
	}
	// The rug pull: fact's description changes after it was pinned.
	tr, _ = run("1")
	if got := toolNames(tr); got != "weather,notes" {
		t.Errorf("listing after the change: %s (fact must be hidden)", got)
	}
	out, err := exec.Command(bin, "mcp", "pins", "--incidents-db", db, "--changed", "--json").Output()
	if err != nil || !strings.Contains(string(out), `"tool":"fact"`) || !strings.Contains(string(out), "larger collection") {
		t.Fatalf("aegis mcp pins --changed: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, "mcp", "pins", "approve", "poisoned", "fact", "--incidents-db", db).CombinedOutput(); err != nil {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	// Approved, fact is pinned as it is now and listed again.
	tr, stderr = run("1")
	if got := toolNames(tr); got != "weather,notes,fact" || strings.Contains(stderr, `"changed":true`) {
		t.Errorf("after approval: %s\n%s", got, grepLines(stderr, "tool flagged"))
	}
	// The incidents are in the same log aegis incidents reads.
	out, err = exec.Command(bin, "incidents", "--incidents-db", db, "--json").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"route":"mcp tools/call"`, `"route":"mcp tools/list"`, `"reason":"secret_leak"`, `"reason":"prompt_injection"`, `"check":"mcp_pin"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("incidents lack %s", want)
		}
	}
}

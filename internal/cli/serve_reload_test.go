package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testlog"
)

// heldUpstream is a llama-server whose first answer stops after its first
// chunk until release is closed; every other answer streams at once.
// Every answer is "one apple."
type heldUpstream struct {
	n       atomic.Int32
	holding chan struct{} // closed when the first answer is held
	release chan struct{}
}

func (h *heldUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	first := h.n.Add(1) == 1
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(text, finish string) {
		fin := "null"
		if finish != "" {
			fin = `"` + finish + `"`
		}
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":%s}]}\n\n", text, fin)
		w.(http.Flusher).Flush()
	}
	chunk("one ", "")
	if first {
		close(h.holding)
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
	}
	chunk("apple.", "")
	chunk("", "stop")
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// banning is a policy that halts any answer with term in it.
func banning(term string) string {
	return fmt.Sprintf("checks:\n  banned: {terms: [%s]}\nactions:\n  banned_content: {action: halt, risk: high}\n", term)
}

// writeAtomically replaces path by renaming a new file over it, as editors
// and configuration managers do.
func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// reloads reads aegis_config_reloads_total{result} from /metrics.
func reloads(t *testing.T, base, result string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var n int
		if _, err := fmt.Sscanf(sc.Text(), `aegis_config_reloads_total{result="`+result+`"} %d`, &n); err == nil {
			return n
		}
	}
	t.Fatalf("no aegis_config_reloads_total{result=%q} in /metrics", result)
	return 0
}

// waitReloads waits until the counter of result reaches n. A reload logs
// its outcome once it is counted, so the counter is looked at again at
// every log line. No wall-clock limit: go test's -timeout ends a reload
// that never comes.
func waitReloads(t *testing.T, base string, logs *testlog.Buffer, result string, n int) {
	t.Helper()
	for {
		changed := logs.Changed()
		if reloads(t, base, result) >= n {
			return
		}
		<-changed
	}
}

// ask streams "one apple." through the gateway and returns the text
// received and the verdict's reason ("" when it passed).
func askStream(t *testing.T, base string) (text, reason string) {
	t.Helper()
	resp, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Error *struct{ Code string } `json:"error"`
		}
		json.Unmarshal([]byte(data), &c)
		if len(c.Choices) > 0 {
			text += c.Choices[0].Delta.Content
		}
		if c.Error != nil {
			reason = c.Error.Code
		}
	}
	return text, reason
}

// TestServeReloadPolicy: a stream held open across a policy change ends
// under the policy it started with, while a request made after the change
// gets the new one; a broken policy file is refused with its file and
// line, and the policy in force stays; SIGHUP reloads too.
func TestServeReloadPolicy(t *testing.T) {
	up := &heldUpstream{holding: make(chan struct{}), release: make(chan struct{})}
	us := httptest.NewServer(up)
	defer us.Close()
	defer close(up.release)
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.yaml")
	writeAtomically(t, pol, banning("zebra"))
	logs := &testlog.Buffer{}
	base := startServeLogs(t, logs, "--upstream", us.URL, "--kind", "llama-server", "--policy", pol,
		"--incidents-db", filepath.Join(dir, "incidents.db"))

	type answer struct{ text, reason string }
	held := make(chan answer, 1)
	go func() {
		text, reason := askStream(t, base)
		held <- answer{text, reason}
	}()
	<-up.holding // the first request is under way, under the policy banning zebra

	writeAtomically(t, pol, banning("apple"))
	waitReloads(t, base, logs, "ok", 1)
	if text, reason := askStream(t, base); reason != "aegis_banned_content" {
		t.Errorf("a request after the change got %q, %q: not halted by the new policy", text, reason)
	}
	up.release <- struct{}{}
	if a := <-held; a.reason != "" || a.text != "one apple." {
		t.Errorf("the stream held across the change got %q, %q: want it to end under its own policy, passed", a.text, a.reason)
	}

	// A broken file: refused, said where, the policy in force stays.
	writeAtomically(t, pol, banning("apple")+"\tmax_retries: 1\n")
	waitReloads(t, base, logs, "failed", 1)
	if _, reason := askStream(t, base); reason != "aegis_banned_content" {
		t.Errorf("after a refused reload a request got reason %q: the policy in force was lost", reason)
	}
	var refused string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "configuration not reloaded") {
			refused = line
		}
	}
	if !strings.Contains(refused, pol) || !strings.Contains(refused, "line 5") {
		t.Errorf("the refusal does not name the file and line: %q", refused)
	}
	var status reloadStatus
	getJSON(t, base+"/ui/api/config", &status)
	if status.Reloads != 1 || status.Failures != 1 || !strings.Contains(status.LastError, "line 5") {
		t.Errorf("dashboard config state %+v", status)
	}

	// SIGHUP reloads the fixed file.
	writeAtomically(t, pol, banning("zebra"))
	waitReloads(t, base, logs, "ok", 2)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitReloads(t, base, logs, "ok", 3)
	if text, reason := askStream(t, base); reason != "" || text != "one apple." {
		t.Errorf("after the reloads a request got %q, %q: want it passed under the policy banning zebra", text, reason)
	}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// startServeLogs runs `aegis serve` in-process with args on a free
// loopback port, its log in logs, and returns its base URL.
func startServeLogs(t *testing.T, logs *testlog.Buffer, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...),
			&IO{In: strings.NewReader(""), Out: io.Discard, Err: logs})
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d; log:\n%s", code, logs.String())
		}
	})
	return waitListening(t, logs, done)
}

func TestRestartOnly(t *testing.T) {
	base := func() *serveConfig {
		return &serveConfig{Listen: "127.0.0.1:8088", LogFormat: "json", Fleet: fleetConfig{NATS: "nats://a"}}
	}
	cases := []struct {
		name   string
		change func(c *serveConfig)
		want   string
	}{
		{"nothing", func(*serveConfig) {}, ""},
		{"policy and upstreams", func(c *serveConfig) {
			c.Upstreams = []upstreamConfig{{URL: "http://x"}}
			c.MaxBodyBytes = 1
			c.KeepAlive = "1s"
		}, ""},
		{"listen", func(c *serveConfig) { c.Listen = "127.0.0.1:9" }, "listen"},
		{"token and fleet", func(c *serveConfig) { c.Auth.TokenFile = "t"; c.Fleet.GuardWorkers = "g" }, "auth fleet"},
		{"guard server", func(c *serveConfig) { c.GuardServer.Deadline = time.Second }, "guard_server"},
		{"incidents and log", func(c *serveConfig) { c.Incidents.Path = "x.db"; c.LogFormat = "text" }, "incidents log_format"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := base()
			c.change(now)
			if got := strings.Join(restartOnly(base(), now), " "); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

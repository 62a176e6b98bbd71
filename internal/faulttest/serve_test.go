package faulttest

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testlog"

	"github.com/aegis-sentinel/aegis/internal/cli"
)

// served is `aegis serve` running in this process.
type served struct {
	url  string
	dir  string
	log  *testlog.Buffer
	stop func()
}

// serve runs `aegis serve` with args in front of upstream, its incident
// log in a fresh directory, until the test ends (or stop is called).
func serve(t *testing.T, upstream string, args ...string) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	s := &served{url: "http://" + addr, dir: dir, log: &testlog.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	all := append([]string{"serve", "--upstream", upstream, "--kind", "llama-server", "--listen", addr,
		"--incidents", filepath.Join(dir, "incidents.db"), "--log-format", "json"}, args...)
	go func() { done <- cli.Run(ctx, all, &cli.IO{In: strings.NewReader(""), Out: io.Discard, Err: s.log}) }()
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			if code := <-done; code != 0 {
				t.Errorf("aegis serve exited %d: %s", code, s.log.String())
			}
		})
	}
	t.Cleanup(s.stop)
	// serve logs where it listens once it does; no wall-clock limit: go
	// test's -timeout ends a start that never ends.
	for {
		changed := s.log.Changed()
		if strings.Contains(s.log.String(), `"msg":"listening`) {
			return s
		}
		select {
		case <-changed:
		case code := <-done:
			t.Fatalf("aegis serve exited %d: %s", code, s.log.String())
		}
	}
}

func (s *served) do(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasSuffix(path, "/events") {
		return resp.StatusCode, "" // an endless stream: the status is the answer
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// marker is unique text sent in prompts, outputs and upstream errors; it
// must not reach the disk unless the policy allows logging text.
const marker = "zq9mark7x"

// markerUpstream answers by the prompt: "error" gets a 500 whose body
// holds the marker, "event" a stream that breaks with an error event
// holding it, "loop" the marker over and over (a repetition loop), and
// anything else an answer quoting the marker in an e-mail address.
func markerUpstream(t *testing.T) *fake {
	return newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Contains(body, []byte("error")):
			http.Error(w, `{"error":{"message":"upstream failed on `+marker+`"}}`, http.StatusInternalServerError)
		case bytes.Contains(body, []byte("event")):
			sseHeader(w)
			f.chunk(w, "Here is "+marker+" for you. ")
			f.raw(w, "event: error\ndata: {\"error\":{\"message\":\"crashed near "+marker+"\"}}\n\n")
		case bytes.Contains(body, []byte("loop")):
			sseHeader(w)
			for i := 0; i < 200 && r.Context().Err() == nil; i++ {
				f.chunk(w, marker+" again and "+marker+" again. ")
			}
			f.finish(w)
		default:
			sseHeader(w)
			f.chunk(w, "Write to "+marker+"@example.org about "+marker+". ")
			f.finish(w)
		}
	})
}

func runMarkerRequests(t *testing.T, s *served) {
	for _, kind := range []string{"error", "event", "loop", "mail"} {
		for _, stream := range []string{"true", "false"} {
			s.do(t, "POST", "/v1/chat/completions", "", `{"model":"m","stream":`+stream+`,"messages":[{"role":"user","content":"`+kind+` please, `+marker+`"}]}`)
		}
	}
}

// onDisk reports which files under dir, or the log, hold the marker.
func onDisk(t *testing.T, s *served) []string {
	var hits []string
	filepath.WalkDir(s.dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(marker)) {
				hits = append(hits, filepath.Base(path))
			}
		}
		return nil
	})
	if strings.Contains(s.log.String(), marker) {
		hits = append(hits, "log")
	}
	return hits
}

func writePolicy(t *testing.T, doc string) string {
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestNoTextOnDisk: with log_text false (the default), a marker sent in
// prompts, outputs and upstream errors is nowhere on disk or in the log
// after the requests are halted, retried and recorded as incidents; with
// log_text true it is in the incident log.
func TestNoTextOnDisk(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy string // "" for the default policy
		want   bool
	}{
		{"default policy", "", false},
		{"an e-mail deny rule quoting its match", "checks: {regex: {deny_presets: [email]}}\n", false},
		{"log_text true", "log_text: true\nchecks: {regex: {deny_presets: [email]}}\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := markerUpstream(t)
			var args []string
			if tc.policy != "" {
				args = append(args, "--policy", writePolicy(t, tc.policy))
			}
			s := serve(t, up.srv.URL, args...)
			runMarkerRequests(t, s)
			s.stop() // flushes the incident log
			if countIncidents(t, s) == 0 {
				t.Fatalf("no incident was recorded; the test proves nothing")
			}
			hits := onDisk(t, s)
			if tc.want && !contains(hits, "incidents.db") && !contains(hits, "incidents.db-wal") {
				t.Fatalf("log_text true: the marker is not in the incident log (found in %v)", hits)
			}
			if !tc.want && len(hits) > 0 {
				t.Fatalf("the marker reached %v", hits)
			}
		})
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// countIncidents counts incidents with `aegis incidents --json`.
func countIncidents(t *testing.T, s *served) int {
	var out, errw bytes.Buffer
	if code := cli.Run(context.Background(), []string{"incidents", "--db", filepath.Join(s.dir, "incidents.db"), "--json", "--limit", "1000"},
		&cli.IO{In: strings.NewReader(""), Out: &out, Err: &errw}); code != 0 {
		t.Fatalf("aegis incidents: exit %d: %s", code, errw.String())
	}
	return strings.Count(out.String(), `"request_id"`)
}

// TestTokenGuardsEverything: with a token set, nothing that shows
// requests, incidents or metrics answers without it.
func TestTokenGuardsEverything(t *testing.T) {
	up := newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request, n int) { streamAnswer(f, w, r) })
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("s3cret-tok\n"), 0o600)
	s := serve(t, up.srv.URL, "--auth-token-file", tok)
	paths := []string{"/ui/", "/ui/app.js", "/ui/api/incidents", "/ui/events", "/metrics", "/v1/models"}
	for _, p := range paths {
		if code, _ := s.do(t, "GET", p, "", ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s without the token: %d", p, code)
		}
		if code, _ := s.do(t, "GET", p, "wrong", ""); code != http.StatusUnauthorized {
			t.Errorf("GET %s with a wrong token: %d", p, code)
		}
		if code, _ := s.do(t, "GET", p, "s3cret-tok", ""); code != http.StatusOK {
			t.Errorf("GET %s with the token: %d", p, code)
		}
	}
	if code, _ := s.do(t, "GET", "/ui/%c0%ae%c0%ae/%c0%ae%c0%ae/etc/passwd", "s3cret-tok", ""); code != http.StatusNotFound {
		t.Errorf("overlong-encoded dots: %d", code)
	}
	if code, _ := s.do(t, "GET", "/health", "", ""); code != http.StatusOK {
		t.Errorf("/health must stay open: %d", code)
	}
}

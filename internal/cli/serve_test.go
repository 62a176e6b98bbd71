package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testlog"
)

func freeAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestServeUsage(t *testing.T) {
	var out, errw bytes.Buffer
	if code := Run(context.Background(), []string{"serve"}, &IO{In: strings.NewReader(""), Out: &out, Err: &errw}); code != ExitUsage {
		t.Fatalf("no upstream: exit %d (%s)", code, errw.String())
	}
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	os.WriteFile(cfg, []byte("upstreams: [{name: a, url: 'http://127.0.0.1:1', kind: openai, modles: [x]}]\n"), 0o600)
	errw.Reset()
	if code := Run(context.Background(), []string{"serve", "--config", cfg}, &IO{In: strings.NewReader(""), Out: &out, Err: &errw}); code != ExitUsage || !strings.Contains(errw.String(), "modles") {
		t.Fatalf("unknown config key: exit %d (%s)", code, errw.String())
	}
}

// TestServeStartsAndStops runs `aegis serve` against a fake
// OpenAI-compatible upstream with a bearer token, checks the start line,
// a guarded request, and a clean stop on cancellation.
func TestServeStartsAndStops(t *testing.T) {
	up := newFakeOpenAI(t)
	addr := freeAddr(t)
	tok := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tok, []byte("s3cret\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	errw := &testlog.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--upstream", up, "--listen", addr, "--auth-token-file", tok}, &IO{In: strings.NewReader(""), Out: io.Discard, Err: errw})
	}()
	if code, ok := errw.WaitFor("listening on", done); !ok {
		t.Fatalf("exit %d before the start line: %s", code, errw.String())
	}
	if !strings.Contains(errw.String(), "(openai)") || !strings.Contains(errw.String(), "bearer token required") {
		t.Fatalf("start line: %s", errw.String())
	}
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"content":"hello"`) || resp.Header.Get("X-Aegis-Verdict") != "pass" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	cancel()
	// serve bounds its own shutdown; go test's -timeout ends one that
	// never stops.
	if code := <-done; code != ExitOK {
		t.Fatalf("exit %d: %s", code, errw.String())
	}
}

func newFakeOpenAI(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/chat/completions":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hello\"},\"finish_reason\":null}]}\n\n")
			io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
		case "/v1/models":
			io.WriteString(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		default:
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// TestServeConfigRouting: a config with two upstreams routes by model
// name, sends unknown models to the default upstream, and takes an
// inline policy.
func TestServeConfigRouting(t *testing.T) {
	a, b := newFakeNamed(t, "from-a"), newFakeNamed(t, "from-b")
	addr := freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "aegis.yaml")
	os.WriteFile(cfg, []byte(`listen: `+addr+`
upstreams:
  - {name: a, url: '`+a+`', kind: openai, models: [alpha]}
  - {name: b, url: '`+b+`', kind: openai}
default: b
policy:
  release: buffer
`), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errw := &testlog.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--config", cfg}, &IO{In: strings.NewReader(""), Out: io.Discard, Err: errw})
	}()
	if code, ok := errw.WaitFor("listening on", done); !ok {
		t.Fatalf("exit %d before the start line: %s", code, errw.String())
	}
	for model, want := range map[string]string{"alpha": "from-a", "beta": "from-b", "": "from-b"} {
		resp, err := http.Post("http://"+addr+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Errorf("model %q: %s", model, body)
		}
	}
	cancel()
	if code := <-done; code != ExitOK {
		t.Fatalf("exit %d: %s", code, errw.String())
	}
}

func newFakeNamed(t *testing.T, word string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\""+word+"\"},\"finish_reason\":null}]}\n\n")
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

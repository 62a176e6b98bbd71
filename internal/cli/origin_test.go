package cli

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testlog"
)

// startServeArgs runs aegis serve with args on a free loopback address until
// the test ends and returns the address.
func startServeArgs(t *testing.T, args ...string) string {
	t.Helper()
	t.Setenv("AEGIS_INCIDENTS", filepath.Join(t.TempDir(), "incidents.db"))
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	errw := &testlog.Buffer{}
	done, exited := make(chan int, 1), make(chan struct{})
	go func() {
		defer close(exited)
		done <- Run(ctx, append([]string{"serve", "--listen", addr}, args...), &IO{In: strings.NewReader(""), Out: io.Discard, Err: errw})
	}()
	t.Cleanup(func() {
		cancel()
		<-exited
	})
	if code, ok := errw.WaitFor("listening on", done); !ok {
		t.Fatalf("exit %d before the start line: %s", code, errw.String())
	}
	return addr
}

// send makes one request to the gateway at addr and returns its status,
// headers and body.
func send(t *testing.T, method, url, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const chatBody = `{"messages":[{"role":"user","content":"hi"}]}`

// TestForeignHostRefusedOnLoopbackAPI: on a loopback listener without a
// token, every endpoint (the API as well as the dashboard) refuses a Host
// that is a DNS name other than localhost, so a DNS-rebinding page cannot
// use the model; localhost and IP Hosts are answered, --allow-host adds a
// name, and with a token the token is the protection.
func TestForeignHostRefusedOnLoopbackAPI(t *testing.T) {
	up := newFakeOpenAI(t)
	t.Setenv("AEGIS_AUTH_TOKEN", "")
	addr := startServeArgs(t, "--upstream", up, "--kind", "openai", "--allow-host", "gateway.internal")
	_, port, _ := strings.Cut(addr, ":")
	for _, ep := range []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", chatBody},
		{"GET", "/v1/models", ""},
		{"GET", "/health", ""},
		{"GET", "/metrics", ""},
		{"GET", "/ui/", ""},
	} {
		url := "http://" + addr + ep.path
		if code, _, body := send(t, ep.method, url, ep.body, map[string]string{"Host": "evil.example:" + port, "Content-Type": "application/json"}); code != http.StatusForbidden {
			t.Errorf("%s %s with Host evil.example: %d %.200s, want 403", ep.method, ep.path, code, body)
		}
		for _, host := range []string{"localhost:" + port, addr, "gateway.internal:" + port} {
			if code, _, body := send(t, ep.method, url, ep.body, map[string]string{"Host": host, "Content-Type": "application/json"}); code != http.StatusOK {
				t.Errorf("%s %s with Host %s: %d %.200s, want 200", ep.method, ep.path, host, code, body)
			}
		}
	}

	t.Setenv("AEGIS_AUTH_TOKEN", "tok-123")
	addr = startServeArgs(t, "--upstream", up, "--kind", "openai")
	code, _, body := send(t, "POST", "http://"+addr+"/v1/chat/completions", chatBody,
		map[string]string{"Host": "evil.example", "Authorization": "Bearer tok-123"})
	if code != http.StatusOK {
		t.Errorf("with a token, a named Host is answered: %d %s", code, body)
	}
}

// TestJSONBodyWithoutJSONContentType: a JSON body is accepted whatever
// its Content-Type (curl -d sends application/x-www-form-urlencoded), as
// Ollama and llama-server do; web pages are kept out by their Origin
// instead: loopback origins and --allow-origin ones are answered (with
// CORS headers), others get 403.
func TestJSONBodyWithoutJSONContentType(t *testing.T) {
	up := newFakeOpenAI(t)
	t.Setenv("AEGIS_AUTH_TOKEN", "")
	addr := startServeArgs(t, "--upstream", up, "--kind", "openai", "--allow-origin", "https://app.example.com")
	url := "http://" + addr + "/v1/chat/completions"
	for _, ct := range []string{"", "application/x-www-form-urlencoded", "text/plain", "application/json"} {
		code, _, body := send(t, "POST", url, chatBody, map[string]string{"Content-Type": ct})
		if code != http.StatusOK || !strings.Contains(body, "hello") {
			t.Errorf("Content-Type %q: %d %s, want 200", ct, code, body)
		}
	}
	for _, tc := range []struct {
		origin string
		code   int
	}{
		{"http://evil.example", 403},
		{"null", 403},
		{"http://localhost:3000", 200},
		{"http://127.0.0.1:5173", 200},
		{"http://[::1]:8000", 200},
		{"https://app.example.com", 200},
		{"http://" + addr, 200}, // the gateway's own pages
	} {
		code, h, body := send(t, "POST", url, chatBody, map[string]string{"Content-Type": "text/plain", "Origin": tc.origin})
		if code != tc.code {
			t.Errorf("Origin %s: %d %.200s, want %d", tc.origin, code, body, tc.code)
		}
		if code == 403 && !strings.Contains(body, "--allow-origin") {
			t.Errorf("Origin %s: the refusal does not say how to allow it: %s", tc.origin, body)
		}
		if code == 200 && h.Get("Access-Control-Allow-Origin") != tc.origin {
			t.Errorf("Origin %s: Access-Control-Allow-Origin %q", tc.origin, h.Get("Access-Control-Allow-Origin"))
		}
	}
	code, h, _ := send(t, "OPTIONS", url, "", map[string]string{"Origin": "http://localhost:3000",
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, authorization"})
	if code != http.StatusNoContent || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		h.Get("Access-Control-Allow-Headers") != "content-type, authorization" {
		t.Errorf("preflight from a loopback origin: %d %v", code, h)
	}
	if code, _, _ := send(t, "OPTIONS", url, "", map[string]string{"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}); code != 403 {
		t.Errorf("preflight from a foreign origin: %d", code)
	}

	_, errOut, exit := runCLI(t, "serve", "--upstream", up, "--kind", "openai", "--listen", freeAddr(t), "--allow-origin", "app.example.com/path")
	if exit != ExitUsage || !strings.Contains(errOut, "app.example.com/path") {
		t.Errorf("bad --allow-origin: exit %d: %s", exit, errOut)
	}
}

// TestForeignHostRefusedOnMCPListener: the MCP proxy's loopback listener
// (no token) refuses a DNS-name Host and a foreign Origin on every path,
// its /mcp endpoint included.
func TestForeignHostRefusedOnMCPListener(t *testing.T) {
	t.Setenv("AEGIS_INCIDENTS", filepath.Join(t.TempDir(), "incidents.db"))
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	errw := &testlog.Buffer{}
	done, exited := make(chan int, 1), make(chan struct{})
	go func() {
		defer close(exited)
		done <- Run(ctx, []string{"mcp", "http", "--upstream", "http://127.0.0.1:1/mcp", "--listen", addr, "--log-format", "text"},
			&IO{In: strings.NewReader(""), Out: io.Discard, Err: errw})
	}()
	t.Cleanup(func() { cancel(); <-exited })
	if code, ok := errw.WaitFor("listening on", done); !ok {
		t.Fatalf("exit %d before the start line: %s", code, errw.String())
	}
	for _, path := range []string{"/mcp", "/metrics"} {
		if code, _, body := send(t, "POST", "http://"+addr+path, "{}", map[string]string{"Host": "evil.example"}); code != 403 || !strings.Contains(body, "host_not_allowed") {
			t.Errorf("%s with Host evil.example: %d %s", path, code, body)
		}
		if code, _, body := send(t, "POST", "http://"+addr+path, "{}", map[string]string{"Origin": "http://evil.example"}); code != 403 || strings.Contains(body, "--allow") {
			t.Errorf("%s with Origin evil.example: %d %s (mcp has no allow flags to name)", path, code, body)
		}
	}
	if code, _, body := send(t, "GET", "http://"+addr+"/metrics", "", nil); code != 200 {
		t.Errorf("/metrics from localhost: %d %.200s", code, body)
	}
}

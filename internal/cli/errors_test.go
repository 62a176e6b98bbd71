package cli

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testlog"

	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// TestErrorsNameNoGoTypes: a config key that does not exist and a request
// field of the wrong type are reported in the config's and the API's
// words, never with Go type names.
func TestErrorsNameNoGoTypes(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "c.yaml")
	os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nupstream: http://127.0.0.1:1\n"), 0o600)
	_, errOut, code := runCLI(t, "serve", "--config", cfg)
	if code != ExitUsage || !strings.Contains(errOut, `"upstream"`) || !strings.Contains(errOut, "line 2") ||
		strings.Contains(errOut, "cli.") || strings.Contains(errOut, "type ") {
		t.Errorf("unknown config key: exit %d: %s", code, errOut)
	}
	os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\nupstreams: [{name: a, url: 'http://127.0.0.1:1', models: alpha}]\n"), 0o600)
	_, errOut, code = runCLI(t, "serve", "--config", cfg)
	if code != ExitUsage || !strings.Contains(errOut, "line 2") || strings.Contains(errOut, "[]string") || strings.Contains(errOut, "cli.") {
		t.Errorf("config value of the wrong type: exit %d: %s", code, errOut)
	}

	up := newFakeOpenAI(t)
	t.Setenv("AEGIS_AUTH_TOKEN", "")
	addr := startServeArgs(t, "--upstream", up, "--kind", "openai")
	status, _, body := send(t, "POST", "http://"+addr+"/v1/chat/completions",
		`{"max_tokens":"ten","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"Content-Type": "application/json"})
	if status != 400 || !strings.Contains(body, "max_tokens") || strings.Contains(body, "Go struct") || strings.Contains(body, "ChatRequest") || strings.Contains(body, "of type int") {
		t.Errorf("max_tokens of the wrong type: %d %s", status, body)
	}
}

// TestErrorsUpstreamDown: with the upstream down, a chat request's error
// names the upstream and the cause without mangled addresses, and
// /v1/models says the upstream could not be reached instead of listing
// no models.
func TestErrorsUpstreamDown(t *testing.T) {
	t.Setenv("AEGIS_AUTH_TOKEN", "")
	down := freeAddr(t) // nothing listens there
	addr := startServeArgs(t, "--upstream", "http://"+down, "--kind", "openai")
	status, _, body := send(t, "POST", "http://"+addr+"/v1/chat/completions", chatBody, nil)
	if status != 502 || !strings.Contains(body, "upstream default") || !strings.Contains(body, "connection refused") ||
		strings.Contains(body, "dial tcp") || strings.Contains(body, `Post \"`) || strings.Contains(body, down) {
		t.Errorf("chat with the upstream down: %d %s", status, body)
	}
	status, _, body = send(t, "GET", "http://"+addr+"/v1/models", "", nil)
	if status != 502 || !strings.Contains(body, "upstream default") || strings.Contains(body, down) {
		t.Errorf("models with the upstream down: %d %s", status, body)
	}
}

// TestErrorsListenWildcard: --listen 0.0.0.0 (no port) listens on port
// 8088 of every address, and the refusal without a token names the
// address as given, not as [::].
func TestErrorsListenWildcard(t *testing.T) {
	if got, err := listenAddr("0.0.0.0"); err != nil || got != "0.0.0.0:8088" {
		t.Errorf("listenAddr(0.0.0.0) = %q, %v", got, err)
	}
	if got, err := listenAddr("::1"); err != nil || got != "[::1]:8088" {
		t.Errorf("listenAddr(::1) = %q, %v", got, err)
	}
	t.Setenv("AEGIS_AUTH_TOKEN", "")
	t.Setenv("AEGIS_INCIDENTS", filepath.Join(t.TempDir(), "incidents.db"))
	_, errOut, code := runCLI(t, "serve", "--upstream", "http://127.0.0.1:1", "--kind", "openai", "--listen", "0.0.0.0:0")
	if code != ExitUsage || !strings.Contains(errOut, "refusing to listen on 0.0.0.0:") || strings.Contains(errOut, "[::]") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// TestErrorsReleaseModeLine: an unknown release mode names its line.
func TestErrorsReleaseModeLine(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.yaml")
	os.WriteFile(p, []byte("max_retries: 1\nrelease: sometimes\n"), 0o600)
	_, errOut, code := runCLI(t, "serve", "--upstream", "http://127.0.0.1:1", "--kind", "openai", "--policy", p)
	if code != ExitUsage || !strings.Contains(errOut, "line 2") || !strings.Contains(errOut, "sometimes") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// TestErrorsMissingFilesExit2: a file named on the command line that does
// not exist is unusable input (exit 2), and it is reported before
// anything else is looked for.
func TestErrorsMissingFilesExit2(t *testing.T) {
	t.Setenv("AEGIS_INCIDENTS", filepath.Join(t.TempDir(), "incidents.db"))
	t.Setenv("PATH", t.TempDir()) // no llama-server
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"devices --llama-server", []string{"devices", "--llama-server", "/nonexistent/llama-server"}, "/nonexistent/llama-server"},
		{"serve --guard-model", []string{"serve", "--upstream", "http://127.0.0.1:1", "--kind", "openai", "--listen", freeAddr(t), "--guard-model", "/nonexistent/guard.gguf"}, "/nonexistent/guard.gguf"},
		{"bench sentinel --model", []string{"bench", "sentinel", "--model", "/nonexistent/nope.gguf"}, "/nonexistent/nope.gguf"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errw := &testlog.Buffer{}
			code := Run(ctx, tc.args, &IO{In: strings.NewReader(""), Out: io.Discard, Err: errw})
			first := strings.SplitN(strings.TrimSpace(errw.String()), "\n", 2)[0]
			if code != ExitUsage || !strings.Contains(errw.String(), tc.want) {
				t.Errorf("exit %d, want %d: %s", code, ExitUsage, errw.String())
			}
			if strings.Contains(first, "llama-server") && !strings.Contains(first, tc.want) {
				t.Errorf("complains about llama-server before the missing file: %s", errw.String())
			}
		})
	}
}

// TestErrorsUpstreamKindNames: llama-server's kind may be written
// llama-server or llama wherever a kind is read (serve's upstreams, a
// guard_llm check, guard workers, aegis eval).
func TestErrorsUpstreamKindNames(t *testing.T) {
	for _, name := range []string{"llama-server", "llama", "llama.cpp", "LLAMA-SERVER", "Llama"} {
		if k, err := upstream.ParseKind(name); err != nil || k != upstream.KindLlamaServer {
			t.Errorf("upstream kind %q: %v, %v", name, k, err)
		}
		if k, err := llm.ParseKind(name); err != nil || k != llm.KindLlama {
			t.Errorf("guard server kind %q: %v, %v", name, k, err)
		}
	}
	for _, name := range []string{"ollama", "Ollama"} {
		if k, err := upstream.ParseKind(name); err != nil || k != upstream.KindOllama {
			t.Errorf("upstream kind %q: %v, %v", name, k, err)
		}
		if k, err := llm.ParseKind(name); err != nil || k != llm.KindOllama {
			t.Errorf("guard server kind %q: %v, %v", name, k, err)
		}
	}
	_, errOut, _ := runCLI(t, "eval", "--help")
	if out, _, _ := runCLI(t, "eval", "--help"); !strings.Contains(out+errOut, "llama-server (or llama)") {
		t.Errorf("eval --help does not name the kind llama-server: %s%s", out, errOut)
	}
}

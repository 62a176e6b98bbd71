package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testlog"
)

// TestStartupConfigMessages: a bad configuration ends with its own
// message alone (no false incident-log error), names the line that is
// wrong, and exits 2 as the README says for unusable input; --config
// reads its policy file next to itself; --listen takes a bare port;
// aegis devices says when it cannot list llama-server's devices.
func TestStartupConfigMessages(t *testing.T) {
	up := newFakeOpenAI(t)
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("AEGIS_INCIDENTS", filepath.Join(dir, "incidents.db"))
	sub := filepath.Join(dir, "conf")
	os.Mkdir(sub, 0o755)
	os.WriteFile(filepath.Join(sub, "policy.yaml"), []byte("max_retries: 1\nchekcs: {}\n"), 0o600)
	cfgRel := filepath.Join(sub, "aegis.yaml")
	os.WriteFile(cfgRel, []byte("upstreams: [{name: a, url: '"+up+"', kind: openai}]\npolicy: policy.yaml\n"), 0o600)

	for _, tc := range []struct {
		name string
		args []string
		code int
		want []string // in stderr
	}{
		{"guard input low", []string{"serve", "--upstream", up, "--kind", "openai", "--listen", freeAddr(t),
			"--policy", write("low.yaml", "release: auto\nguard:\n  input: low\n")}, ExitUsage, []string{"line 3", "input"}},
		{"yaml brace line", []string{"serve", "--upstream", up, "--kind", "openai",
			"--policy", write("brace.yaml", "max_retries: 2\nchecks:\n  banned: {terms: [a, b}\n")}, ExitUsage, []string{"line 3"}},
		{"config policy next to the config", []string{"serve", "--config", cfgRel}, ExitUsage, []string{"chekcs", "line 2"}},
		{"plan missing model", []string{"plan", filepath.Join(dir, "nope.gguf")}, ExitUsage, []string{"nope.gguf"}},
		{"plan not a gguf", []string{"plan", write("text.gguf", "just text, not a model\n")}, ExitUsage, []string{"text.gguf"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := runCLI(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d: %s", code, tc.code, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q: %s", w, errOut)
				}
			}
			if strings.Contains(errOut, "retention") || strings.Contains(errOut, "context canceled") {
				t.Errorf("a false error before the configuration's own: %s", errOut)
			}
		})
	}

	t.Run("listen takes a port", func(t *testing.T) {
		port := freeAddr(t)[len("127.0.0.1:"):]
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		errw := &testlog.Buffer{}
		done := make(chan int, 1)
		go func() {
			done <- Run(ctx, []string{"serve", "--upstream", up, "--kind", "openai", "--listen", port}, &IO{In: strings.NewReader(""), Out: io.Discard, Err: errw})
		}()
		if code, ok := errw.WaitFor("listening on", done); !ok {
			t.Fatalf("exit %d: %s", code, errw.String())
		}
		resp, err := http.Get("http://127.0.0.1:" + port + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		cancel()
		if code := <-done; code != ExitOK {
			t.Fatalf("exit %d: %s", code, errw.String())
		}
	})

	t.Run("devices without llama-server", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		_, errOut, code := runCLI(t, "devices")
		if code != ExitOK || !strings.Contains(errOut, "llama-server is not on PATH") || !strings.Contains(errOut, "--llama-server") {
			t.Fatalf("exit %d: %s", code, errOut)
		}
	})
}

// TestNonLoopbackNeedsToken: serve refuses a listener other hosts can
// reach when no bearer token guards it, and with --insecure-no-auth starts
// with a loud warning.
func TestNonLoopbackNeedsToken(t *testing.T) {
	up := newFakeOpenAI(t)
	t.Setenv("AEGIS_INCIDENTS", filepath.Join(t.TempDir(), "incidents.db"))
	t.Setenv("AEGIS_AUTH_TOKEN", "")
	{
		ctx, cancel := context.WithCancel(context.Background())
		errw := &testlog.Buffer{}
		done := make(chan int, 1)
		go func() {
			done <- Run(ctx, []string{"serve", "--upstream", up, "--kind", "openai", "--listen", "0.0.0.0:0"}, &IO{In: strings.NewReader(""), Out: io.Discard, Err: errw})
		}()
		code, started := errw.WaitFor("listening on", done)
		cancel()
		if started {
			code = <-done
		}
		if started || code != ExitUsage || !strings.Contains(errw.String(), "refusing") || !strings.Contains(errw.String(), "--insecure-no-auth") {
			t.Fatalf("started %v, exit %d: %s", started, code, errw.String())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errw := &testlog.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--upstream", up, "--kind", "openai", "--listen", "0.0.0.0:0", "--insecure-no-auth"},
			&IO{In: strings.NewReader(""), Out: io.Discard, Err: errw})
	}()
	if code, ok := errw.WaitFor("listening on", done); !ok {
		t.Fatalf("exit %d: %s", code, errw.String())
	}
	if !strings.Contains(errw.String(), "SECURITY") || !strings.Contains(errw.String(), "WARN") {
		t.Fatalf("no loud warning: %s", errw.String())
	}
	cancel()
	<-done
}

// TestDefaultNamingNoUpstream: a config whose default: names no upstream
// is refused at start with exit 2 and the names it could have used,
// instead of starting and failing every request.
func TestDefaultNamingNoUpstream(t *testing.T) {
	up := newFakeOpenAI(t)
	t.Setenv("AEGIS_INCIDENTS", filepath.Join(t.TempDir(), "incidents.db"))
	cfg := filepath.Join(t.TempDir(), "aegis.yaml")
	os.WriteFile(cfg, []byte("listen: "+freeAddr(t)+"\nupstreams:\n  - {name: big, url: '"+up+"', kind: openai, models: [m]}\ndefault: bgi\n"), 0o600)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errw := &testlog.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--config", cfg}, &IO{In: strings.NewReader(""), Out: io.Discard, Err: errw})
	}()
	code, started := errw.WaitFor("listening on", done)
	cancel()
	if started {
		code = <-done
	}
	if started || code != ExitUsage || !strings.Contains(errw.String(), `"bgi"`) || !strings.Contains(errw.String(), "big") {
		t.Fatalf("started %v, exit %d: %s", started, code, errw.String())
	}
}

package cli

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testlog"

	"github.com/spf13/pflag"
)

func TestHostPort(t *testing.T) {
	for _, tc := range []struct {
		name, listen, host string
		port               int
		want               string
		err                bool
	}{
		{"port only", "127.0.0.1:8088", "", 9000, "127.0.0.1:9000", false},
		{"host only", "127.0.0.1:8088", "0.0.0.0", 0, "0.0.0.0:8088", false},
		{"both", "127.0.0.1:8088", "::1", 9000, "[::1]:9000", false},
		{"bad port", "127.0.0.1:8088", "", 70000, "", true},
		{"bad listen", "nope", "", 9000, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hostPort(tc.listen, tc.host, tc.port)
			if (err != nil) != tc.err || got != tc.want {
				t.Fatalf("got %q %v, want %q", got, err, tc.want)
			}
		})
	}
}

func TestFlagsFromEnv(t *testing.T) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	a := fs.String("max-body-bytes", "", "")
	b := fs.String("listen", "default", "")
	c := fs.String("old", "", "")
	fs.MarkHidden("old")
	n := fs.Int("port", 0, "")
	fs.Parse([]string{"--listen", "cli"})
	t.Setenv("AEGIS_MAX_BODY_BYTES", "99")
	t.Setenv("AEGIS_LISTEN", "env")
	t.Setenv("AEGIS_OLD", "x")
	t.Setenv("AEGIS_PORT", "12")
	if err := flagsFromEnv(fs); err != nil {
		t.Fatal(err)
	}
	if *a != "99" || *b != "cli" || *c != "" || *n != 12 {
		t.Fatalf("got %q %q %q %d: the command line wins, then the environment; former (hidden) names are not read", *a, *b, *c, *n)
	}
	t.Setenv("AEGIS_PORT", "twelve")
	fs2 := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs2.Int("port", 0, "")
	if err := flagsFromEnv(fs2); err == nil || !strings.Contains(err.Error(), "AEGIS_PORT") {
		t.Fatalf("a bad value names its variable: %v", err)
	}
}

// TestServeSetupConventions: the upstream given as host:port/v1 in
// AEGIS_UPSTREAM is normalised with a log line, --port sets the port of
// the default listen address, and a down upstream does not stop the start.
func TestServeSetupConventions(t *testing.T) {
	up := newFakeOpenAI(t) // http://127.0.0.1:port
	for _, tc := range []struct {
		name, upstream, wantLog string
		wantStatus              int
	}{
		{"host:port/v1 from the environment", strings.TrimPrefix(up, "http://") + "/v1", "ends in /v1", 200},
		{"upstream down", "127.0.0.1:1", "not answering", 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AEGIS_UPSTREAM", tc.upstream)
			t.Setenv("AEGIS_INCIDENTS_DB", filepath.Join(t.TempDir(), "inc.db"))
			addr := freeAddr(t)
			port := addr[strings.LastIndex(addr, ":")+1:]
			ctx, cancel := context.WithCancel(context.Background())
			errw := &testlog.Buffer{}
			done := make(chan int, 1)
			go func() {
				done <- Run(ctx, []string{"serve", "--port", port}, &IO{In: strings.NewReader(""), Out: io.Discard, Err: errw})
			}()
			defer func() { cancel(); <-done }()
			if code, ok := errw.WaitFor("listening on", done); !ok {
				t.Fatalf("exit %d: %s", code, errw.String())
			}
			if !strings.Contains(errw.String(), tc.wantLog) || !strings.Contains(errw.String(), "127.0.0.1:"+port) {
				t.Fatalf("start log: %s", errw.String())
			}
			resp, err := http.Post("http://127.0.0.1:"+port+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.wantStatus || strings.Contains(string(b), "127.0.0.1") {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
		})
	}
}

func TestProgressLines(t *testing.T) {
	var b strings.Builder
	p := progressLines(&b, "aegis bench: ")
	p(1, 3, "cpu tg16")
	p(3, 3, "done")
	if got, want := b.String(), "aegis bench: [1/3] cpu tg16\naegis bench: [3/3] done\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestUserModelPathOutsideSource(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_DATA_HOME", dir)
	p, err := userModelPath()
	if err != nil || p != filepath.Join(dir, "aegis", "guard.bin") {
		t.Fatalf("%q %v", p, err)
	}
}

package cli

import (
	"bytes"
	"context"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testlog"
)

// TestServeNotifiesSystemd: under a service manager (NOTIFY_SOCKET) serve
// says READY=1 once it listens, feeds the watchdog (WATCHDOG_USEC) while
// its heartbeat answers, says RELOADING=1 then READY=1 around a reload,
// and STOPPING=1 when it stops.
func TestServeNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "100000") // fed every 50 ms
	t.Setenv("WATCHDOG_PID", "")
	us := httptest.NewServer(&heldUpstream{holding: make(chan struct{}), release: make(chan struct{})})
	defer us.Close()
	pol := filepath.Join(t.TempDir(), "policy.yaml")
	writeAtomically(t, pol, banning("zebra"))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	logs := &testlog.Buffer{}
	go func() {
		done <- Run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--upstream", us.URL, "--kind", "llama-server",
			"--policy", pol, "--incidents-db", filepath.Join(t.TempDir(), "i.db")}, &IO{In: strings.NewReader(""), Out: &bytes.Buffer{}, Err: logs})
	}()
	defer func() {
		cancel()
		<-done
	}()
	msgs := make(chan string, 64)
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := c.Read(b)
			if err != nil {
				close(msgs)
				return
			}
			msgs <- string(b[:n])
		}
	}()
	// next waits for a message starting with want, skipping watchdog
	// feeds unless they are what is wanted. No wall-clock limit: go
	// test's -timeout ends a message that never comes.
	next := func(want string) {
		t.Helper()
		for m := range msgs {
			if strings.HasPrefix(m, want) {
				return
			}
			if m != "WATCHDOG=1" {
				t.Fatalf("got %q waiting for %q; log:\n%s", m, want, logs.String())
			}
		}
		t.Fatalf("socket closed waiting for %q", want)
	}
	next("READY=1")
	next("WATCHDOG=1")
	next("WATCHDOG=1")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	next("RELOADING=1\nMONOTONIC_USEC=")
	next("READY=1")
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, logs.String())
	}
	done <- 0
	next("STOPPING=1")
}

// TestServeCheck: serve --check loads the configuration and the policy,
// says so and exits 0, or exits 2 naming the file and line.
func TestServeCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "policy.yaml")
	os.WriteFile(good, []byte(banning("zebra")), 0o600)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(banning("zebra")+"\tmax_retries: 1\n"), 0o600)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte("listen: 127.0.0.1:9\nupstreams:\n  - {name: a, url: http://127.0.0.1:1, kind: llama-server}\npolicy: policy.yaml\n"), 0o600)
	badCfg := filepath.Join(dir, "badconfig.yaml")
	os.WriteFile(badCfg, []byte("listen: 127.0.0.1:9\nupstreams:\n  - {name: a, url: http://127.0.0.1:1, kind: llama-server}\npolcy: policy.yaml\n"), 0o600)
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"config and policy", []string{"--config", cfg}, 0, "configuration OK: 1 upstream(s), policy " + good},
		{"policy flag", []string{"--upstream", "http://127.0.0.1:1", "--policy", good}, 0, "configuration OK"},
		{"broken policy", []string{"--upstream", "http://127.0.0.1:1", "--policy", bad}, 2, bad + ": yaml: line 5"},
		{"unknown config key", []string{"--config", badCfg}, 2, `line 4: unknown field "polcy"`},
		{"bad upstream kind", []string{"--upstream", "http://127.0.0.1:1", "--kind", "vllm"}, 2, "vllm"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errs, code := runCLI(t, append([]string{"serve", "--check"}, c.args...)...)
			if code != c.code || !strings.Contains(out+errs, c.want) {
				t.Fatalf("exit %d (want %d)\nstdout %s\nstderr %s\nwant %q", code, c.code, out, errs, c.want)
			}
		})
	}
}

// TestSystemdUnit checks contrib/systemd/aegis.service with
// systemd-analyze verify, when the machine has it: no error, no warning.
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	unit, err := os.ReadFile(filepath.Join("..", "..", "contrib", "systemd", "aegis.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(unit, []byte("ExecStartPre=/usr/local/bin/aegis serve --check")) || !bytes.Contains(unit, []byte("Type=notify")) {
		t.Fatal("the unit lost its check before start or its notify type")
	}
	// verify wants the binaries to exist: the test's own stands in for aegis.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "aegis.service")
	if err := os.WriteFile(p, bytes.ReplaceAll(unit, []byte("/usr/local/bin/aegis"), []byte(self)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, analyze, "verify", "--man=no", p).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestServeConfigKeepAlive(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		err  bool
	}{{"", 0, false}, {"off", -1, false}, {"15s", 15 * time.Second, false}, {"2ms", 2 * time.Millisecond, false},
		{"0s", 0, true}, {"-1s", 0, true}, {"soon", 0, true}} {
		got, err := (&serveConfig{KeepAlive: c.in}).keepAlive()
		if (err != nil) != c.err || got != c.want {
			t.Errorf("keep_alive %q: %v, %v", c.in, got, err)
		}
	}
}

package sdnotify

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// listen is a service manager's notification socket.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func read(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 4096)
	n, err := c.Read(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[:n])
}

func TestSend(t *testing.T) {
	t.Run("no socket", func(t *testing.T) {
		t.Setenv("NOTIFY_SOCKET", "")
		if ok, err := Send(Ready); ok || err != nil {
			t.Fatalf("ok %v err %v outside systemd", ok, err)
		}
	})
	t.Run("path", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "notify")
		c := listen(t, p)
		t.Setenv("NOTIFY_SOCKET", p)
		if ok, err := Send(Ready); !ok || err != nil {
			t.Fatalf("ok %v err %v", ok, err)
		}
		if got := read(t, c); got != "READY=1" {
			t.Fatalf("got %q", got)
		}
		Send(ReloadingNow())
		if got := read(t, c); !strings.HasPrefix(got, "RELOADING=1\nMONOTONIC_USEC=") || strings.HasSuffix(got, "=0") {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("abstract", func(t *testing.T) {
		name := "aegis-test-" + filepath.Base(t.TempDir())
		c := listen(t, "@"+name)
		t.Setenv("NOTIFY_SOCKET", "@"+name)
		if ok, err := Send(Watchdog); !ok || err != nil {
			t.Fatalf("ok %v err %v", ok, err)
		}
		if got := read(t, c); got != "WATCHDOG=1" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("not a socket path", func(t *testing.T) {
		t.Setenv("NOTIFY_SOCKET", "vsock:2:1234")
		if _, err := Send(Ready); err == nil || !strings.Contains(err.Error(), "NOTIFY_SOCKET") {
			t.Fatalf("err %v", err)
		}
	})
}

func TestWatchdogInterval(t *testing.T) {
	cases := []struct {
		name, usec, pid string
		want            time.Duration
		err             bool
	}{
		{"off", "", "", 0, false},
		{"half of it", "30000000", "", 15 * time.Second, false},
		{"for another process", "30000000", "1", 0, false},
		{"not a number", "30s", "", 0, true},
		{"zero", "0", "", 0, true},
		{"bad pid", "1000", "x", 0, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("WATCHDOG_USEC", c.usec)
			t.Setenv("WATCHDOG_PID", c.pid)
			got, err := WatchdogInterval()
			if (err != nil) != c.err || got != c.want {
				t.Fatalf("got %v, %v", got, err)
			}
		})
	}
}

package supervisor

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/devices"
)

// TestFailoverResendsToTheNextServer: the preferred server dies while a
// request is due; the client's request is answered by the CPU fallback,
// not lost. The HTTP servers are real; the processes are fakes.
func TestFailoverResendsToTheNextServer(t *testing.T) {
	defer noLeaks(t)()
	serve := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			io.WriteString(w, name+":"+string(b))
		}))
	}
	a, b := serve("A"), serve("B")
	defer b.Close()
	port := func(s *httptest.Server) int { return s.Listener.Addr().(*net.TCPAddr).Port }
	ports := make(chan int, 2)
	ports <- port(a)
	ports <- port(b)

	w := newFakeWorld(func(dev string, n int) behaviour { return behaviour{} })
	cfg, _ := w.config(devices.Device{Name: "Vulkan0"})
	cfg.MaxRestarts = -1
	cfg.PickPort = func() (int, error) { return <-ports, nil }
	s := New(cfg)
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.URL() != "http://127.0.0.1:"+strconv.Itoa(port(a)) {
		t.Fatalf("serving %s", s.URL())
	}
	client := s.HTTPClient(5 * time.Second)
	post := func() (string, error) {
		resp, err := client.Post("http://guard/completion", "application/json", strings.NewReader("x"))
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	if got, err := post(); err != nil || got != "A:x" {
		t.Fatalf("before: %q %v", got, err)
	}
	// The server dies: its socket closes, then the process exits.
	a.CloseClientConnections()
	a.Close()
	w.current("Vulkan0").exit(errors.New("signal: killed"))
	if got, err := post(); err != nil || got != "B:x" {
		t.Fatalf("after the crash: %q %v, want the fallback's answer", got, err)
	}
	if s.State() != StateFallback || !s.Device().IsCPU() {
		t.Errorf("state %s on %q", s.State(), s.Device().Name)
	}
	client.CloseIdleConnections()
	stop(t, s, w)
	// With nothing left the client says so instead of hanging.
	if _, err := post(); !errors.Is(err, ErrDeterministic) {
		t.Errorf("after Stop: %v, want ErrDeterministic", err)
	}
}

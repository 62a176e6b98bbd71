package supervisor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/aegis-sentinel/aegis/internal/llamaserver"
)

// Health is the answer of one health probe.
type Health int

// Health probe results.
const (
	HealthDown    Health = iota // no answer, or an error status
	HealthLoading               // 503 while the model loads
	HealthOK                    // 200
	// HealthGone: the port refuses connections. A server that was
	// ready and now refuses is going away (a killed process closes its
	// sockets before it can be reaped), not slow.
	HealthGone
)

func (h Health) String() string {
	switch h {
	case HealthOK:
		return "ok"
	case HealthLoading:
		return "loading"
	case HealthGone:
		return "gone"
	}
	return "down"
}

// HealthFunc probes a server at baseURL.
type HealthFunc func(ctx context.Context, baseURL string) Health

// HTTPHealth probes GET baseURL/health as llama-server answers it: 200
// when ready, 503 while loading.
func HTTPHealth(client *http.Client) HealthFunc {
	if client == nil {
		client = llamaserver.Shared
	}
	return func(ctx context.Context, baseURL string) Health {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/health", nil)
		if err != nil {
			return HealthDown
		}
		resp, err := client.Do(req)
		if errors.Is(err, syscall.ECONNREFUSED) {
			return HealthGone
		}
		if err != nil {
			return HealthDown
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		switch resp.StatusCode {
		case http.StatusOK:
			return HealthOK
		case http.StatusServiceUnavailable:
			return HealthLoading
		}
		return HealthDown
	}
}

// PickPort returns a free loopback TCP port.
func PickPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("supervisor: pick port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

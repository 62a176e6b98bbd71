package testbed

import (
	"net"
	"strings"
	"testing"
)

// TestEnginesRestart checks what the fleet tests rely on: a private engine
// stops (its port closes) and starts again on the same port.
func TestEnginesRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(testing.TB) *Engine
	}{
		{"postgres", StartPostgres},
		{"nats", StartNATS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tc.start(t)
			addr := e.URL[strings.Index(e.URL, "@")+1:]
			addr = strings.TrimPrefix(addr, "nats://")
			addr, _, _ = strings.Cut(addr, "/")
			dial := func() error {
				c, err := net.Dial("tcp", addr)
				if err == nil {
					c.Close()
				}
				return err
			}
			if err := dial(); err != nil {
				t.Fatalf("not listening after start: %v", err)
			}
			e.Stop()
			if dial() == nil {
				t.Fatal("still listening after Stop")
			}
			if err := e.Start(); err != nil {
				t.Fatal(err)
			}
			if err := dial(); err != nil {
				t.Fatalf("not listening after restart: %v", err)
			}
		})
	}
}

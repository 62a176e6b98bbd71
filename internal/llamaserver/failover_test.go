package llamaserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// servers is a chain of URLs; the first one still listed serves.
// AwayFrom drops base from the chain, as a supervisor falls back when a
// server died.
type servers struct {
	mu    sync.Mutex
	urls  []string
	moved int
}

func (s *servers) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.urls) == 0 {
		return ""
	}
	return s.urls[0]
}

var errNone = errors.New("no server left")

func (s *servers) WaitServing(context.Context) (string, error) {
	if u := s.URL(); u != "" {
		return u, nil
	}
	return "", errNone
}

func (s *servers) AwayFrom(_ context.Context, base string, _ time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.moved++
	if len(s.urls) > 0 && s.urls[0] == base {
		s.urls = s.urls[1:]
	}
	return nil
}

// dead accepts connections and closes them before answering.
func dead(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func alive(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, "got "+string(b))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestFailover(t *testing.T) {
	cases := []struct {
		name    string
		chain   func(t *testing.T) []string
		want    string // body, or "" for an error
		wantErr error
	}{
		{"serving server answers", func(t *testing.T) []string { return []string{alive(t)} }, "got verdict?", nil},
		{"dead server: resent to the next", func(t *testing.T) []string { return []string{dead(t), alive(t)} }, "got verdict?", nil},
		{"every server dead", func(t *testing.T) []string { return []string{dead(t), dead(t)} }, "", errNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &servers{urls: tc.chain(t)}
			c := &http.Client{Transport: Failover(s, 3, time.Millisecond, nil)}
			resp, err := c.Post("http://guard.invalid/completion", "text/plain", strings.NewReader("verdict?"))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if b, _ := io.ReadAll(resp.Body); string(b) != tc.want {
				t.Errorf("body %q, want %q", b, tc.want)
			}
		})
	}
}

// A server that keeps failing while it still serves is given up on after
// its tries, not retried for ever.
func TestFailoverGivesUpOnAServerThatStaysUp(t *testing.T) {
	s := &stuck{url: dead(t)}
	c := &http.Client{Transport: Failover(s, 3, time.Millisecond, nil)}
	_, err := c.Post("http://guard.invalid/completion", "text/plain", strings.NewReader("x"))
	if err == nil || !strings.Contains(err.Error(), "keeps failing") {
		t.Fatalf("err %v", err)
	}
	if s.waits != 1 { // the first failure is retried at once, the second waits, the third gives up
		t.Errorf("%d waits for the servers to change, want 1", s.waits)
	}
}

type stuck struct {
	url   string
	waits int
}

func (s *stuck) URL() string                                           { return s.url }
func (s *stuck) WaitServing(context.Context) (string, error)           { return s.url, nil }
func (s *stuck) AwayFrom(context.Context, string, time.Duration) error { s.waits++; return nil }

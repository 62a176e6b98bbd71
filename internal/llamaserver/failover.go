package llamaserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// maxReplayBody bounds the request body kept for a resend.
const maxReplayBody = 8 << 20

// Servers is what a failover transport asks about the servers behind it
// (the guard supervisor's chain of devices).
type Servers interface {
	// WaitServing returns the URL of the server that serves now, waiting
	// while one starts; it fails when none will.
	WaitServing(ctx context.Context) (string, error)
	// URL is the serving server's URL, "" when none serves.
	URL() string
	// AwayFrom waits until the server at base no longer serves (another
	// serves, or none will) or wait has passed, and fails only when ctx
	// ends first.
	AwayFrom(ctx context.Context, base string, wait time.Duration) error
}

// Failover returns a transport that sends each request to the server
// that serves now and, when the connection failed before any response
// byte, sends it again: at once on the same server (a kept-alive
// connection the server had closed fails that way), else to whatever
// serves next. A server that fails tries times while still serving is
// given up on; settle is how long to wait for the servers to change
// before trying the same one again. next carries the requests (nil: the
// llama-server transport).
func Failover(s Servers, tries int, settle time.Duration, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = transport
	}
	return &failover{s: s, tries: max(tries, 1), settle: settle, next: next}
}

type failover struct {
	s      Servers
	tries  int
	settle time.Duration
	next   http.RoundTripper
}

func (t *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxReplayBody+1))
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("llama-server failover: reading request body: %w", err)
		}
		if len(b) > maxReplayBody {
			return nil, fmt.Errorf("llama-server failover: request body over %d bytes", maxReplayBody)
		}
		body = b
	}
	ctx := req.Context()
	// New URLs come only from (bounded) restarts and fallbacks, so the
	// loop ends.
	var lastErr error
	failures := map[string]int{}
	for {
		base, err := t.s.WaitServing(ctx)
		if err != nil {
			if lastErr != nil {
				return nil, fmt.Errorf("%w (after %v)", err, lastErr)
			}
			return nil, err
		}
		u, err := url.Parse(base)
		if err != nil {
			return nil, fmt.Errorf("llama-server failover: bad server URL %q: %w", base, err)
		}
		r2 := req.Clone(ctx)
		r2.URL.Scheme, r2.URL.Host, r2.Host = u.Scheme, u.Host, ""
		if body != nil {
			r2.Body = io.NopCloser(bytes.NewReader(body))
			r2.ContentLength = int64(len(body))
		}
		resp, err := t.next.RoundTrip(r2)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, err
		}
		// A kept-alive connection the server closed fails the same way
		// as a dead server: the first failure on a URL is retried at once.
		failures[base]++
		if failures[base] >= t.tries {
			return nil, fmt.Errorf("llama-server failover: %s keeps failing while it still serves: %w", base, lastErr)
		}
		if failures[base] == 1 && t.s.URL() == base {
			continue
		}
		// The server went away: wait until another serves (a standby, a
		// restart) or none will. If nothing changes within settle the
		// error was transient and the same server is tried again.
		if err := t.s.AwayFrom(ctx, base, t.settle); err != nil {
			return nil, fmt.Errorf("llama-server failover: %w (after %v)", err, lastErr)
		}
	}
}

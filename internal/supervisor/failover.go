package supervisor

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// maxReplayBody bounds the request body kept for a resend.
const maxReplayBody = 8 << 20

// failoverTransport sends each request to the serving guard server and
// resends it after a server change when the connection failed before a
// response arrived.
type failoverTransport struct {
	s    *Supervisor
	base http.RoundTripper
}

func (t *failoverTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxReplayBody+1))
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("supervisor: reading request body: %w", err)
		}
		if len(b) > maxReplayBody {
			return nil, fmt.Errorf("supervisor: request body over %d bytes", maxReplayBody)
		}
		body = b
	}
	ctx := req.Context()
	// Each server URL gets UnhealthyAfter+1 tries: by then a dead or hung
	// server has been noticed and replaced. New URLs come only from
	// (bounded) restarts and fallbacks, so the loop ends.
	perURL := t.s.cfg.UnhealthyAfter + 1
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
			return nil, fmt.Errorf("supervisor: bad server URL %q: %w", base, err)
		}
		r2 := req.Clone(ctx)
		r2.URL.Scheme, r2.URL.Host, r2.Host = u.Scheme, u.Host, ""
		if body != nil {
			r2.Body = io.NopCloser(bytes.NewReader(body))
			r2.ContentLength = int64(len(body))
		}
		resp, err := t.base.RoundTrip(r2)
		if err == nil {
			return resp, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return nil, err
		}
		// A kept-alive connection the server closed (llama-server ends
		// them after 100 requests) fails the same way as a dead server:
		// the first failure on a URL is retried at once.
		failures[base]++
		if failures[base] >= perURL {
			return nil, fmt.Errorf("supervisor: %s keeps failing while its health checks pass: %w", base, lastErr)
		}
		if failures[base] == 1 && t.s.URL() == base {
			continue
		}
		// The server went away: wait until the supervisor serves from
		// elsewhere (a standby, a restart) or gives up. If nothing
		// changes within a health interval the error was transient and
		// the same server is tried again.
		timer := time.NewTimer(t.s.cfg.HealthInterval)
	wait:
		for {
			st, ch := t.s.Status()
			if st.URL != base || st.State == StateDeterministic || st.State == StateStopped {
				break
			}
			select {
			case <-ch:
			case <-timer.C:
				break wait
			case <-ctx.Done():
				timer.Stop()
				return nil, fmt.Errorf("supervisor: %w (after %v)", ctx.Err(), lastErr)
			}
		}
		timer.Stop()
	}
}

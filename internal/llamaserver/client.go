// Package llamaserver holds the HTTP side of talking to llama-server,
// shared by every part of Aegis that calls one. Failover is the transport
// that sends a call to whichever server of a chain serves now and resends
// it when that server died before answering (the guard supervisor's
// client). Starting a server is package llamaproc's job.
//
// The HTTP client is shared by everything that talks to llama-server
// (guard workers, the guard check, sweeps, the testbed helpers, and the
// gateway's upstream through NewTransport and Resend), so the one thing
// llama-server needs from a client is done in one place: llama-server closes kept-alive connections after 5 s
// idle (Keep-Alive: timeout=5, max=100), so a client must not keep them
// longer, and must send a POST again when it met a connection the server
// had just closed, before any byte of an answer.
//
// Go's transport resends a request on such a connection only when the
// request is replayable; for a POST that takes an Idempotency-Key header.
// The client's transport marks every POST whose body can be rewound that
// way, with a present but empty header, which Go honours and does not
// send.
package llamaserver

import (
	"net/http"
	"time"
)

// IdleTimeout is how long an idle connection is kept: under llama-server's
// keep-alive timeout of 5 s.
const IdleTimeout = 4 * time.Second

// Shared is the client for calls bounded by their context (no overall
// timeout).
var Shared = NewClient(0)

// NewClient returns a client with the llama-server transport and an
// overall timeout (0: none; the caller's context bounds each call).
func NewClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: newTransport()}
}

// transport is the llama-server transport of Failover.
var transport = newTransport()

func newTransport() http.RoundTripper {
	return Replayable(NewTransport(16))
}

// Replayable wraps next so that every POST with a rewindable body is sent
// again when its kept-alive connection was closed before any response
// byte.
func Replayable(next http.RoundTripper) http.RoundTripper { return replayable{next} }

type replayable struct{ next http.RoundTripper }

func (r replayable) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.GetBody != nil && req.Header.Get("Idempotency-Key") == "" {
		if _, set := req.Header["Idempotency-Key"]; !set {
			req = req.Clone(req.Context())
			req.Header["Idempotency-Key"] = nil // present, empty: replayable, and not sent
		}
	}
	return r.next.RoundTrip(req)
}

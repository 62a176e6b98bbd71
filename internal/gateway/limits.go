package gateway

import (
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

// The HTTP server's timeouts, chosen for a gateway whose responses stream
// for minutes:
//
//   - ReadHeaderTimeout bounds the request line and headers, so a
//     slowloris client cannot hold a connection by trickling them.
//   - BodyReadTimeout (per request, set by the handler) bounds reading the
//     request body, so a body trickled a byte at a time cannot either.
//     http.Server.ReadTimeout is not used: it would also cut the
//     connection's read side while a long response streams.
//   - IdleTimeout bounds a keep-alive connection waiting for its next
//     request.
//   - There is no overall WriteTimeout (a long generation is legitimate);
//     instead each write to the client must complete within
//     ClientWriteTimeout, so a client that stops reading is dropped once
//     its connection's buffers stay full that long.
const (
	ReadHeaderTimeout         = 10 * time.Second
	DefaultBodyReadTimeout    = 30 * time.Second
	ServerIdleTimeout         = 90 * time.Second
	DefaultClientWriteTimeout = 60 * time.Second
)

// DefaultMaxConcurrentStreams is the default limit on generating requests
// in flight; past it a request is answered 503 at once.
const DefaultMaxConcurrentStreams = 256

// DefaultMaxResponseBytes bounds the output text one response may hold
// (far above any model's context); past it the response is halted with
// length_exceeded.
const DefaultMaxResponseBytes = 4 << 20

// NewServer returns the http.Server for h with the timeouts above.
func NewServer(h http.Handler, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		IdleTimeout:       ServerIdleTimeout,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          errorLog,
	}
}

// positiveOr returns v when it is set (positive), else def.
func positiveOr[T int | int64 | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

func (g *Gateway) bodyReadTimeout() time.Duration {
	return positiveOr(g.BodyReadTimeout, DefaultBodyReadTimeout)
}

func (g *Gateway) clientWriteTimeout() time.Duration {
	return positiveOr(g.ClientWriteTimeout, DefaultClientWriteTimeout)
}

func (g *Gateway) maxResponse() int { return positiveOr(g.MaxResponseBytes, DefaultMaxResponseBytes) }

// acquireStream takes a slot for a generating request; it reports false
// when MaxConcurrentStreams are already in flight.
func (g *Gateway) acquireStream() bool {
	g.streamsOnce.Do(func() {
		g.streams = make(chan struct{}, positiveOr(g.MaxConcurrentStreams, DefaultMaxConcurrentStreams))
	})
	select {
	case g.streams <- struct{}{}:
		return true
	default:
		return false
	}
}

func (g *Gateway) releaseStream() { <-g.streams }

// busy answers a request refused because every stream slot is taken.
func busy(w http.ResponseWriter, path string, limit int) {
	w.Header().Set("Retry-After", "1")
	fail(w, path, http.StatusServiceUnavailable, apiError{
		Message: fmt.Sprintf("aegis is serving its limit of %d concurrent requests (max_concurrent_streams); retry shortly", limit),
		Type:    "aegis_unavailable", Code: "aegis_overloaded"})
}

// withReadDeadline reads the body under the body read timeout, then
// lifts the deadline so the connection can notice a client that leaves
// while the response streams.
func (g *Gateway) withReadDeadline(w http.ResponseWriter, read func() ([]byte, int, error)) ([]byte, int, error) {
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(g.bodyReadTimeout())) != nil {
		return read() // not a net/http connection (tests, wrappers)
	}
	b, status, err := read()
	if err != nil {
		// Keep the deadline: the server must not wait for the rest of the
		// body before answering, and the connection is not reused.
		w.Header().Set("Connection", "close")
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, http.StatusRequestTimeout, fmt.Errorf("request body not received within %s", g.bodyReadTimeout())
		}
		return b, status, err
	}
	rc.SetReadDeadline(time.Time{})
	return b, status, nil
}

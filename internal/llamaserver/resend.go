package llamaserver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"syscall"
)

// NewTransport returns the transport every llama-server client starts
// from: Go's default transport (proxies from the environment, dial and
// TLS timeouts) keeping at most maxIdlePerHost idle connections per
// server, each dropped after IdleTimeout (before the server drops it),
// and no transparent gzip, which would buffer a stream.
func NewTransport(maxIdlePerHost int) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = max(tr.MaxIdleConns, maxIdlePerHost)
	tr.MaxIdleConnsPerHost = maxIdlePerHost
	tr.IdleConnTimeout = IdleTimeout
	tr.DisableCompression = true
	return tr
}

// Resend calls send and, while the call failed before any byte of a
// response arrived with a connection error that Resendable accepts, calls
// it again, at most resends more times: the server never sees one request
// more than resends+1 times, and a failure after the first response byte
// is never resent. send must build a fresh request with the context it is
// given (which carries the trace that notices the first byte).
func Resend(ctx context.Context, resends int, send func(context.Context) (*http.Response, error)) (*http.Response, error) {
	var err error
	for try := 0; try <= resends; try++ {
		var gotByte atomic.Bool
		tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotFirstResponseByte: func() { gotByte.Store(true) }})
		var resp *http.Response
		resp, err = send(tctx)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil || gotByte.Load() || !Resendable(err) {
			break
		}
	}
	return nil, err
}

// Resendable reports whether err is a connection failure that happened
// before any response byte arrived on a connection the server closed or
// reset: sending the request again is safe and expected.
func Resendable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
		return true
	}
	// The transport closed the connection under the request it was
	// writing, having read the server's close: llama-server closes the
	// connection after every streamed answer without saying so, and the
	// next request on it may be half written when the close is read.
	if errors.Is(err, net.ErrClosed) {
		return true
	}
	// net/http reports a server that closed an idle connection this way.
	return strings.Contains(err.Error(), "server closed idle connection")
}

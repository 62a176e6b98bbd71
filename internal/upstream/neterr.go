package upstream

import (
	"errors"
	"net"
	"net/url"
	"os"
)

// requestError is a request to an upstream that got no answer. Its
// message names the method, the path and the cause ("POST
// /v1/chat/completions: connection refused"), not the upstream's address,
// so it can go to a client as it is.
type requestError struct {
	method, path string
	err          error
}

func (e *requestError) Error() string { return e.method + " " + e.path + ": " + cause(e.err) }
func (e *requestError) Unwrap() error { return e.err }

// cause returns the reason a request failed without the URL and the
// dialled address that net/http and net put around it.
func cause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		if de.IsNotFound {
			return "no such host"
		}
		return "name lookup failed"
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		var se *os.SyscallError
		if errors.As(oe.Err, &se) {
			return se.Err.Error() // "connection refused", "connection reset by peer"
		}
		if oe.Timeout() {
			return "timed out"
		}
		return oe.Err.Error()
	}
	return err.Error()
}

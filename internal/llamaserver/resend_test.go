package llamaserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"syscall"
	"testing"
)

func TestResend(t *testing.T) {
	reset := fmt.Errorf("read: %w", syscall.ECONNRESET)
	cases := []struct {
		name    string
		resends int
		errs    []error // what each try returns; nil answers
		byte    []bool  // whether each try saw a response byte first
		tries   int
		fails   bool
	}{
		{name: "answers at once", resends: 1, errs: []error{nil}, tries: 1},
		{name: "reset, then answers", resends: 1, errs: []error{reset, nil}, tries: 2},
		{name: "connection closed under the request", resends: 1, errs: []error{&net.OpError{Op: "readfrom", Net: "tcp", Err: &net.OpError{Op: "write", Net: "tcp", Err: net.ErrClosed}}, nil}, tries: 2},
		{name: "server closed idle connection", resends: 1, errs: []error{errors.New("http: server closed idle connection"), nil}, tries: 2},
		{name: "at most once more", resends: 1, errs: []error{io.EOF, io.EOF, nil}, tries: 2, fails: true},
		{name: "twice more when asked", resends: 2, errs: []error{io.EOF, io.EOF, nil}, tries: 3},
		{name: "never after a response byte", resends: 1, errs: []error{io.ErrUnexpectedEOF, nil}, byte: []bool{true}, tries: 1, fails: true},
		{name: "not a connection failure", resends: 3, errs: []error{errors.New("no such host"), nil}, tries: 1, fails: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tries := 0
			resp, err := Resend(context.Background(), tc.resends, func(ctx context.Context) (*http.Response, error) {
				i := tries
				tries++
				if i < len(tc.byte) && tc.byte[i] {
					httptrace.ContextClientTrace(ctx).GotFirstResponseByte()
				}
				if e := tc.errs[i]; e != nil {
					return nil, e
				}
				return &http.Response{StatusCode: 200}, nil
			})
			if tries != tc.tries || (err != nil) != tc.fails || (resp == nil) != tc.fails {
				t.Fatalf("tries %d, err %v; want %d tries, failure %v", tries, err, tc.tries, tc.fails)
			}
		})
	}
}

func TestResendStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	_, err := Resend(ctx, 3, func(context.Context) (*http.Response, error) {
		tries++
		cancel()
		return nil, io.EOF
	})
	if tries != 1 || err == nil {
		t.Fatalf("tries %d, err %v; want one try and its error", tries, err)
	}
}

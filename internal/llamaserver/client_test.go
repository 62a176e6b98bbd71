package llamaserver

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// closingServer answers the first request of every connection and keeps
// it alive, then closes the connection when the next request arrives on
// it, before any answer: what llama-server does to a client that reuses a
// connection just as its keep-alive timeout ends. It returns its URL and
// the "Idempotency-Key" headers it saw on the wire.
func closingServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var keyHeaders atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				if _, ok := req.Header["Idempotency-Key"]; ok {
					keyHeaders.Add(1)
				}
				io.Copy(io.Discard, req.Body)
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\nKeep-Alive: timeout=5, max=100\r\n\r\n{\"ok\":true}")
				if req2, err := http.ReadRequest(br); err == nil {
					io.Copy(io.Discard, req2.Body)
				}
				// ...and close without answering the second request.
			}()
		}
	}()
	return "http://" + l.Addr().String(), &keyHeaders
}

func TestResendOnClosedKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		name    string
		client  *http.Client
		wantErr bool
	}{
		{"plain client fails", &http.Client{Transport: &http.Transport{}}, true},
		{"llama-server client resends", NewClient(0), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, keys := closingServer(t)
			var err error
			for i := range 3 {
				var resp *http.Response
				resp, err = tc.client.Post(url+"/completion", "application/json", strings.NewReader(`{"prompt":"x"}`))
				if err != nil {
					break
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("call %d: status %d", i, resp.StatusCode)
				}
			}
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if keys.Load() != 0 {
				t.Errorf("the Idempotency-Key marker went on the wire %d times", keys.Load())
			}
		})
	}
}

func TestReplayableKeepsCallersKey(t *testing.T) {
	var seen []string
	rt := Replayable(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		seen = append(seen, fmt.Sprint(r.Header["Idempotency-Key"]))
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	}))
	for _, key := range []string{"", "k1"} {
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/", strings.NewReader("{}"))
		if key != "" {
			req.Header.Set("Idempotency-Key", key)
		}
		rt.RoundTrip(req)
	}
	if fmt.Sprint(seen) != "[[] [k1]]" {
		t.Errorf("headers seen %v", seen)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

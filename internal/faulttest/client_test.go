package faulttest

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/gateway"
)

// bigPiece is the text bigAnswer repeats.
var bigPiece = strings.Repeat("abcdefghijklmnopqrstuvwxyz0123456789 the quick brown fox. ", 4096/58+1)[:4096]

// bigAnswer streams size bytes of text in chunks of 4 KiB, as fast as the
// gateway takes them, and stops when the gateway hangs up. It does not
// record what it sent (the test would hold it all): the text is bigPiece
// over and over.
func bigAnswer(size int) func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
	return func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
		sseHeader(w)
		frame := "data: " + chatChunk(bigPiece) + "\n\n"
		for sent := 0; sent < size && r.Context().Err() == nil; sent += len(bigPiece) {
			f.raw(w, frame)
		}
		f.finish(w)
	}
}

// TestClientLeaves: a client that hangs up mid-stream stops the upstream
// generation (its request is cancelled) and leaves nothing behind.
func TestClientLeaves(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		f := newFake(t, bigAnswer(1<<30))
		r := newRig(t, f, "checks: {stall: {ttft: 300ms, gap: 300ms}, repetition: false}\n", nil)
		resp := r.post(ask, true)
		br := bufio.NewReader(resp.Body)
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		r.client.Transport.(*http.Transport).CloseIdleConnections()
		r.srv.Close() // waits for the handler to finish
		f.srv.Close() // waits for the upstream handler: it saw the cancellation
		if f.gone.Load() != 1 {
			t.Fatalf("the upstream request was not cancelled (posts %d, gone %d)", f.posts.Load(), f.gone.Load())
		}
	})
}

// TestHostileClients: requests a client could use to pin or confuse the
// gateway get a clear 4xx or 503 and the connection back.
func TestHostileClients(t *testing.T) {
	cases := []struct {
		name   string
		raw    string // sent as is, then the response is read
		tweak  func(*gateway.Gateway)
		status int
		want   string
	}{
		{name: "body trickled past the body timeout",
			raw:    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{",
			tweak:  func(g *gateway.Gateway) { g.BodyReadTimeout = 200 * time.Millisecond },
			status: 408, want: "request body not received"},
		{name: "text/plain body is read as JSON",
			raw:    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: " + strconv.Itoa(len(ask)) + "\r\n\r\n" + ask,
			status: 200, want: answer[:20]},
		{name: "body over the size limit",
			raw:    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n" + strings.Repeat(" ", 100),
			tweak:  func(g *gateway.Gateway) { g.MaxBodyBytes = 50 },
			status: 413, want: "larger than"},
		{name: "nesting too deep",
			raw:    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n" + strings.Repeat("[", 200) + strings.Repeat("]", 200),
			status: 400, want: "nested deeper"},
		{name: "two spaces after Bearer",
			raw:    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer  tok\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(ask)) + "\r\n\r\n" + ask,
			tweak:  func(g *gateway.Gateway) { g.AuthToken = "tok" },
			status: 401, want: "bearer token"},
		{name: "lower-case bearer scheme",
			raw:    "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: bearer tok\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(ask)) + "\r\n\r\n" + ask,
			tweak:  func(g *gateway.Gateway) { g.AuthToken = "tok" },
			status: 200, want: answer[:20]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			noLeaks(t, func(t *testing.T) {
				f := newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request, n int) { streamAnswer(f, w, r) })
				r := newRig(t, f, patientStall, tc.tweak)
				c, err := net.Dial("tcp", r.srv.Listener.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				io.WriteString(c, tc.raw)
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.want) {
					t.Fatalf("got %d %s; want %d with %q", resp.StatusCode, b, tc.status, tc.want)
				}
			})
		})
	}
}

// TestSlowHeaders: a client trickling its headers is cut off by the
// server's header timeout (shortened here; the mechanism is the point).
func TestSlowHeaders(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		f := newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request, n int) { streamAnswer(f, w, r) })
		r := newRigServer(t, f, patientStall, nil, func(s *http.Server) { s.ReadHeaderTimeout = 200 * time.Millisecond })
		c, err := net.Dial("tcp", r.srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
		// The server closes the connection (after an optional 408).
		if _, err := io.ReadAll(c); err != nil {
			t.Fatalf("connection not closed cleanly: %v", err)
		}
	})
}

// TestStreamLimit: past max_concurrent_streams a request is refused at
// once with 503, and served again once a slot frees.
func TestStreamLimit(t *testing.T) {
	noLeaks(t, func(t *testing.T) {
		hold := make(chan struct{})
		f := newFake(t, func(f *fake, w http.ResponseWriter, r *http.Request, n int) {
			if n == 1 {
				sseHeader(w)
				f.chunk(w, "first ")
				select {
				case <-hold:
				case <-r.Context().Done():
				}
				f.finish(w)
				return
			}
			streamAnswer(f, w, r)
		})
		r := newRig(t, f, "checks: {stall: false}\n", func(g *gateway.Gateway) { g.MaxConcurrentStreams = 1 })
		first := r.post(ask, true)
		br := bufio.NewReader(first.Body)
		br.ReadString('\n') // the first stream is under way
		o := read(t, r.post(ask, false), false)
		if o.status != 503 || o.code != "aegis_overloaded" {
			t.Fatalf("second request: %d %q", o.status, o.code)
		}
		close(hold)
		io.Copy(io.Discard, br)
		first.Body.Close()
		if o := read(t, r.post(ask, false), false); o.status != 200 || o.content != answer {
			t.Fatalf("after the first ended: %d %q", o.status, o.content)
		}
	})
}

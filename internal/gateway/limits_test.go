package gateway

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

const chatBody = `{"messages":[{"role":"user","content":"x"}]}`

func TestAuthorizationHeaderForms(t *testing.T) {
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write(sseBody(chatChunk("ok"), finishChunk)) })
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, AuthToken: "s3cret"})
	for _, tc := range []struct {
		header string
		want   int
	}{
		{"Bearer s3cret", 200},
		{"bearer s3cret", 200},
		{"BEARER s3cret", 200},
		{"Bearer  s3cret", 401},
		{"Bearer\ts3cret", 401},
		{"Basic s3cret", 401},
		{"Bearer s3cre", 401},
	} {
		t.Run(tc.header, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
			req.Header.Set("Authorization", tc.header)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			readAllBody(t, resp)
			if resp.StatusCode != tc.want {
				t.Fatalf("%q: %d, want %d", tc.header, resp.StatusCode, tc.want)
			}
		})
	}
}

// TestContentTypeNotRequired: the body is read as JSON whatever its
// Content-Type says, as Ollama and llama-server do (curl -d sends
// application/x-www-form-urlencoded); web pages are kept out by their
// Origin in front of the gateway instead.
func TestContentTypeNotRequired(t *testing.T) {
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write(sseBody(chatChunk("ok"), finishChunk)) })
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}})
	for _, tc := range []struct {
		ct   string
		want int
	}{
		{"application/json", 200},
		{"application/json; charset=utf-8", 200},
		{"Application/JSON", 200},
		{"application/vnd.api+json", 200},
		{"", 200},
		{"text/plain", 200},
		{"application/x-www-form-urlencoded", 200},
		{"multipart/form-data; boundary=x", 200},
		{"application/json; charset", 200},
	} {
		t.Run(tc.ct, func(t *testing.T) {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(chatBody))
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b := readAllBody(t, resp)
			if resp.StatusCode != tc.want {
				t.Fatalf("%q: %d %s, want %d", tc.ct, resp.StatusCode, b, tc.want)
			}
		})
	}
}

// TestMaxConcurrentStreams: with the only slot held by a stream the
// upstream has not answered, the next request gets 503 at once.
func TestMaxConcurrentStreams(t *testing.T) {
	arrived, unblock := make(chan struct{}), make(chan struct{})
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-unblock
		w.Write(sseBody(chatChunk("ok"), finishChunk))
	})
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, MaxConcurrentStreams: 1})
	first := make(chan int)
	go func() {
		resp := post(t, srv.URL+"/v1/chat/completions", chatBody)
		readAllBody(t, resp)
		first <- resp.StatusCode
	}()
	<-arrived
	resp := post(t, srv.URL+"/v1/chat/completions", chatBody)
	b := readAllBody(t, resp)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "max_concurrent_streams") {
		t.Fatalf("second request: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	close(unblock)
	if s := <-first; s != 200 {
		t.Fatalf("first request: %d", s)
	}
	// The slot is free again.
	arrived2 := make(chan struct{}, 1)
	go func() { <-arrived; arrived2 <- struct{}{} }()
	resp = post(t, srv.URL+"/v1/chat/completions", chatBody)
	readAllBody(t, resp)
	if resp.StatusCode != 200 {
		t.Fatalf("after release: %d", resp.StatusCode)
	}
}

// TestSlowBodyTimesOut: a client that sends its headers and then trickles
// the body is answered 408 once the body read timeout passes, and its
// connection is closed.
func TestSlowBodyTimesOut(t *testing.T) {
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write(sseBody(chatChunk("ok"), finishChunk)) })
	g := &Gateway{Upstreams: []*upstream.Upstream{up}, BodyReadTimeout: 200 * time.Millisecond}
	srv := httptest.NewUnstartedServer(g)
	srv.Config = NewServer(g, nil)
	srv.Start()
	defer srv.Close()
	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Headers promise 100 bytes; only one arrives. The test waits on the
	// server's answer, not on a clock.
	c.Write([]byte("POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b := readAllBody(t, resp)
	if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "request body not received") {
		t.Fatalf("got %d %s", resp.StatusCode, b)
	}
}

// TestMaxResponseBytes: an upstream that sends more than the cap gets the
// response halted with length_exceeded, and no retry asks for it again.
func TestMaxResponseBytes(t *testing.T) {
	var calls atomic.Int32
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Write(sseBody(chatChunk("12345678"), chatChunk("12345678"), chatChunk("12345678"), finishChunk))
	})
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, MaxResponseBytes: 20})
	s := readStream(t, post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true}`), false)
	if s.errEv == nil || !strings.Contains(string(s.errEv["error"]), "aegis_length_exceeded") || !strings.Contains(string(s.errEv["error"]), "max_response_bytes") {
		t.Fatalf("no clear error: %q", s.events)
	}
	if len(s.content) > 20 || calls.Load() != 1 {
		t.Fatalf("client got %d bytes over %d upstream calls", len(s.content), calls.Load())
	}
	resp := post(t, srv.URL+"/v1/chat/completions", chatBody)
	b := readAllBody(t, resp)
	if resp.StatusCode != HaltStatus(validator.ReasonLengthExceeded, validator.ActionHalt) || !strings.Contains(string(b), "max_response_bytes") {
		t.Fatalf("non-streaming: %d %s", resp.StatusCode, b)
	}
}

// TestReadAll: a body read at its declared length is read whole, a
// shorter one is an error, and an unknown or over-limit length reads as
// io.ReadAll would (the limit is the reader's to enforce).
func TestReadAll(t *testing.T) {
	for _, c := range []struct {
		name            string
		body            string
		declared, limit int64
		want            string
		err             error
	}{
		{"declared length", `{"a":1}`, 7, 64, `{"a":1}`, nil},
		{"unknown length", `{"a":1}`, -1, 64, `{"a":1}`, nil},
		{"shorter than declared", `{"a"`, 7, 64, "", io.ErrUnexpectedEOF},
		{"declared over the limit", `{"a":1}`, 100, 64, `{"a":1}`, nil},
		{"empty", ``, 0, 64, ``, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readAll(strings.NewReader(c.body), c.declared, c.limit)
			if !errors.Is(err, c.err) || err == nil && string(got) != c.want {
				t.Fatalf("readAll = %q, %v; want %q, %v", got, err, c.want, c.err)
			}
		})
	}
}

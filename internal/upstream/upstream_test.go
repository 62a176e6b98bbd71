package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

func TestParseKind(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Kind
		err  bool
	}{
		{"llama-server", KindLlamaServer, false},
		{"Ollama", KindOllama, false},
		{"openai", KindOpenAI, false},
		{"", KindUnknown, false},
		{"vllm", KindUnknown, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			k, err := ParseKind(tc.in)
			if (err != nil) != tc.err || k != tc.want {
				t.Fatalf("ParseKind(%q) = %v, %v", tc.in, k, err)
			}
		})
	}
}

// closingServer answers every request on a connection with a keep-alive
// response and then closes the connection after max requests without
// saying so, the way a server with "Keep-Alive: max=N" races a client
// that reuses the connection.
func closingServer(t *testing.T, max int) (string, *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var served atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				br := bufio.NewReader(c)
				for n := 0; n < max; n++ {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					served.Add(1)
					fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nKeep-Alive: timeout=5, max=%d\r\nContent-Length: 29\r\n\r\ndata: {\"x\":1}\n\ndata: [DONE]\n\n", max)
				}
				// Close abruptly, with the client believing the connection reusable.
			}(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return "http://" + ln.Addr().String(), &served
}

func TestPostResendsOnClosedConnection(t *testing.T) {
	url, served := closingServer(t, 3)
	u, err := New("fake", url, KindLlamaServer)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Client.CloseIdleConnections()
	for i := 0; i < 60; i++ {
		resp, err := u.Post(context.Background(), "/v1/chat/completions", []byte(`{}`), nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		s := NewSSEStream(resp.Body)
		p, err := s.Next()
		if err != nil || string(p) != `{"x":1}` {
			t.Fatalf("request %d: %q %v", i, p, err)
		}
		if _, err := s.Next(); err != io.EOF {
			t.Fatalf("request %d: want EOF after [DONE], got %v", i, err)
		}
		s.Close()
	}
	if served.Load() < 60 {
		t.Fatalf("served %d", served.Load())
	}
}

func TestStreamTruncated(t *testing.T) {
	s := NewSSEStream(io.NopCloser(strings.NewReader("data: {}\n\n")))
	if _, err := s.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Next(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("err = %v", err)
	}
	n := NewNDJSONStream(io.NopCloser(strings.NewReader("{\"done\":false}\n{\"done\":true}\n")))
	for i := 0; i < 2; i++ {
		if _, err := n.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Next(); err != io.EOF {
		t.Fatal(err)
	}
}

func TestDetectFakes(t *testing.T) {
	llama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/props" {
			io.WriteString(w, `{"default_generation_settings":{}}`)
			return
		}
		http.NotFound(w, r)
	}))
	defer llama.Close()
	ollama := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/version" {
			io.WriteString(w, `{"version":"0.6.5"}`)
			return
		}
		http.NotFound(w, r)
	}))
	defer ollama.Close()
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	for _, tc := range []struct {
		name, url string
		want      Kind
	}{{"llama", llama.URL, KindLlamaServer}, {"ollama", ollama.URL, KindOllama}, {"openai", other.URL, KindOpenAI}} {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := New(tc.name, tc.url, KindUnknown)
			k, err := Detect(context.Background(), u)
			if err != nil || k != tc.want {
				t.Fatalf("Detect = %v, %v", k, err)
			}
		})
	}
	down, _ := New("down", "http://127.0.0.1:1", KindUnknown)
	if _, err := Detect(context.Background(), down); err == nil {
		t.Fatal("Detect on a closed port succeeded")
	}
}

func TestTestbedDetectAndHealth(t *testing.T) {
	env := testbed.Require(t, "llama-cpu", "ollama")
	for _, tc := range []struct {
		url  string
		want Kind
	}{{env.LlamaCPUURL, KindLlamaServer}, {env.OllamaURL, KindOllama}} {
		u, err := New(tc.want.String(), tc.url, KindUnknown)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a hang, not a speed
		k, err := Detect(ctx, u)
		cancel()
		if err != nil || k != tc.want {
			t.Fatalf("%s: Detect = %v, %v", tc.url, k, err)
		}
		u.Kind = k
		if err := u.Health(context.Background()); err != nil {
			t.Fatal(err)
		}
		u.Client.CloseIdleConnections()
	}
}

// TestTestbedKeepAliveMax sends more requests than llama-server's
// keep-alive max=100 over one pooled client, with pauses around the
// server's 5 s idle timeout avoided (the client's 4 s idle timeout is
// what protects that edge); none may fail.
func TestTestbedKeepAliveMax(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	u, err := New("llama", env.LlamaCPUURL, KindLlamaServer)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Client.CloseIdleConnections()
	body := []byte(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"stream":true}`)
	for i := 0; i < 230; i++ {
		resp, err := u.Post(context.Background(), "/v1/chat/completions", body, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
		s := NewSSEStream(resp.Body)
		for {
			_, err := s.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
		}
		s.Close()
	}
}

// TestPostResendsAtMostOnce: a server that reads the request and closes
// without a response byte gets the POST twice, never three times; one
// that sent part of its headers first gets it once.
func TestPostResendsAtMostOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		want   int64
	}{
		{"closed before any byte", "", 2},
		{"closed after a byte", "HTTP/1.1 2", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var posts atomic.Int64
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil && req.Method == http.MethodPost {
						posts.Add(1)
						io.WriteString(c, tc.prefix)
					}
					c.Close()
				}
			}()
			u, err := New("fake", "http://"+ln.Addr().String(), KindLlamaServer)
			if err != nil {
				t.Fatal(err)
			}
			defer u.Client.CloseIdleConnections()
			if _, err := u.Post(context.Background(), "/v1/chat/completions", []byte(`{}`), nil); err == nil {
				t.Fatal("want an error")
			}
			if got := posts.Load(); got != tc.want {
				t.Fatalf("the upstream got %d POSTs; want %d", got, tc.want)
			}
		})
	}
}

// TestClientReadsInLargePieces: the shared transport reads a response in
// pieces of 16 KiB, so a stream of many small chunks that queued up
// while the reader was busy costs one read, not one per 4 KiB.
func TestClientReadsInLargePieces(t *testing.T) {
	tr, ok := NewClient().Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport is %T", NewClient().Transport)
	}
	if tr.ReadBufferSize < 16<<10 {
		t.Errorf("ReadBufferSize %d, want at least 16 KiB", tr.ReadBufferSize)
	}
}

// TestStreamEndedAndDrain: a stream is Ended only at its last event, not
// at an error, and Drain reads what follows it to the body's end within
// its limit.
func TestStreamEndedAndDrain(t *testing.T) {
	for _, tc := range []struct {
		name    string
		s       *Stream
		ended   bool
		limit   int64
		reached bool
	}{
		{"done marker", NewSSEStream(io.NopCloser(strings.NewReader("data: {}\n\ndata: [DONE]\n\n"))), true, 10, true},
		{"bytes after done", NewSSEStream(io.NopCloser(strings.NewReader("data: {}\n\ndata: [DONE]\n\n" + strings.Repeat("x", 1<<20)))), true, 10, false},
		{"bytes within the limit", NewSSEStream(io.NopCloser(strings.NewReader("data: {}\n\ndata: [DONE]\n\nxx"))), true, 10, true},
		{"final event", NewEventStream(io.NopCloser(strings.NewReader("event: a\ndata: {}\n\nevent: stop\ndata: {}\n\n")), func(name string, _ []byte) bool { return name == "stop" }), true, 10, true},
		{"truncated", NewSSEStream(io.NopCloser(strings.NewReader("data: {}\n\n"))), false, 10, true},
		{"ndjson", NewNDJSONStream(io.NopCloser(strings.NewReader("{\"done\":true}\n"))), true, 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for {
				if _, err := tc.s.Next(); err != nil {
					break
				}
			}
			if got := tc.s.Ended(); got != tc.ended {
				t.Fatalf("Ended() = %v, want %v", got, tc.ended)
			}
			if got := tc.s.Drain(tc.limit); got != tc.reached {
				t.Fatalf("Drain(%d) = %v, want %v", tc.limit, got, tc.reached)
			}
			tc.s.Close()
		})
	}
}

// FuzzParseWork: llama-server's /slots and Ollama's /api/ps answers, as
// bad as they come, parse or fail with an error, never a panic.
func FuzzParseWork(f *testing.F) {
	for _, s := range []string{
		`[{"id":0,"is_processing":true,"id_task":7,"n_prompt_tokens":9000,"n_prompt_tokens_processed":2048}]`,
		`[{"id":0,"is_processing":false}]`, `[]`, `[{"busy":true}]`, `{"slots":"busy"`, `null`, `[null]`,
		`{"models":[{"name":"stories:latest","model":"stories:latest"}]}`, `{"models":[]}`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if slots, err := ParseSlots(b); err == nil && slots == nil && len(b) > 0 && string(b) != "null" {
			t.Fatalf("%q: no slots and no error", b)
		}
		ParseLoaded(b)
	})
}

// TestParseSlots: the fields a slot must have, and what is read of it.
func TestParseSlots(t *testing.T) {
	for _, tc := range []struct {
		name, in, err string
		want          []Slot
	}{
		{"busy", `[{"id":0,"is_processing":true,"id_task":7,"n_prompt_tokens":9000,"n_prompt_tokens_processed":2048,"params":{}}]`, "", []Slot{{ID: 0, Processing: true, Task: 7, PromptTokens: 9000, PromptDone: 2048}}},
		{"idle", `[{"id":1,"is_processing":false}]`, "", []Slot{{ID: 1}}},
		{"not an array", `{"id":0}`, "want a JSON array of slots", nil},
		{"no id", `[{"is_processing":true}]`, `slot 0 has no "id"`, nil},
		{"wrong type", `[{"id":"zero","is_processing":true}]`, "slot 0", nil},
		{"null slot", `[null]`, `slot 0 has no "id"`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSlots([]byte(tc.in))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

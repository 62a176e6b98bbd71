package gateway

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/sse"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// namedEvents reads a recorded stream of testdata into its events, each
// framed again with its name.
func namedEvents(t testing.TB, name string) [][]byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var evs [][]byte
	rd := sse.NewReader(bytes.NewReader(raw))
	for ev, err := rd.Next(); err == nil; ev, err = rd.Next() {
		evs = append(evs, appendNamed(nil, ev.Name, ev.Data))
	}
	return evs
}

// countDials makes u's client count the connections it opens.
func countDials(u *upstream.Upstream) *atomic.Int64 {
	var n atomic.Int64
	tr := upstream.NewClient().Transport.(*http.Transport)
	dial := (&net.Dialer{}).DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		n.Add(1)
		return dial(ctx, network, addr)
	}
	u.Client = &http.Client{Transport: tr}
	return &n
}

// streamThrough sends body to url and reads the answer to its end.
func streamThrough(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, %v: %.300s", resp.StatusCode, err, b)
	}
	return string(b)
}

// TestUpstreamConnectionReused: once a streamed answer has ended, the
// next request to the upstream goes on the same connection, on each
// streaming wire. The upstream here ends its chunked body only after the
// client got the whole answer: a reader that closed the body at the last
// event, before the body's end, would lose the connection (and a new one
// costs the next request's time to first token).
func TestUpstreamConnectionReused(t *testing.T) {
	for _, tc := range []struct{ path, capture, body string }{
		{"/v1/chat/completions", "llama-chat-200.sse", string(benchBody)},
		{"/v1/messages", "wire/llama-messages-200.sse", `{"model":"m","max_tokens":200,"messages":[{"role":"user","content":"Tell me a story."}],"stream":true}`},
		{"/v1/responses", "wire/llama-responses-200.sse", `{"model":"m","input":"Tell me a story.","stream":true}`},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/v1/"), func(t *testing.T) {
			noLeaks(t)
			evs := namedEvents(t, tc.capture)
			answered := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				for _, ev := range evs {
					w.Write(ev)
				}
				w.(http.Flusher).Flush()
				<-answered // then the body ends
			}))
			t.Cleanup(up.Close)
			u := mustUpstream(t, "replay", up.URL, upstream.KindLlamaServer)
			dials := countDials(u)
			t.Cleanup(u.Client.CloseIdleConnections)
			closed := make(chan struct{}, 1)
			aegis := start(t, &Gateway{Upstreams: []*upstream.Upstream{u}, closeHook: func() { closed <- struct{}{} }})
			for i := range 3 {
				if out := streamThrough(t, aegis.URL+tc.path, tc.body); !strings.Contains(out, `"aegis"`) {
					t.Fatalf("request %d: no verdict in %.300s", i, out)
				}
				answered <- struct{}{}
				<-closed
			}
			if n := dials.Load(); n != 1 {
				t.Fatalf("3 requests opened %d connections to the upstream, want 1", n)
			}
		})
	}
}

// TestUpstreamBodyLeftOpen: an upstream that keeps its body open after
// the stream's last event does not hold the client's answer, and its
// connection is not reused.
func TestUpstreamBodyLeftOpen(t *testing.T) {
	noLeaks(t)
	release := make(chan struct{})
	evs := namedEvents(t, "llama-chat-200.sse")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range evs {
			w.Write(ev)
		}
		w.(http.Flusher).Flush()
		select { // the body stays open after [DONE]
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) })
	u := mustUpstream(t, "open", up.URL, upstream.KindLlamaServer)
	dials := countDials(u)
	t.Cleanup(u.Client.CloseIdleConnections)
	closed := make(chan struct{}, 1)
	aegis := start(t, &Gateway{Upstreams: []*upstream.Upstream{u}, closeHook: func() { closed <- struct{}{} }})
	for i := range 2 {
		out := streamThrough(t, aegis.URL+"/v1/chat/completions", string(benchBody))
		if !strings.HasSuffix(out, "data: [DONE]\n\n") {
			t.Fatalf("request %d: the answer did not end: %.300s", i, out[max(0, len(out)-300):])
		}
		<-closed // after drainWait the reader gave up on the body
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("2 requests opened %d connections, want 2 (a body left open is not reused)", n)
	}
}

// TestTestbedUpstreamConnectionReused: Ollama keeps its connection open
// after a streamed answer, and Aegis's next request goes on it, on the
// OpenAI-compatible SSE route (which ends with "[DONE]" before the end of
// the body) and on the native NDJSON one. (llama-server closes its
// connection after each streamed answer: there is nothing to reuse.)
func TestTestbedUpstreamConnectionReused(t *testing.T) {
	env := testbed.Require(t, "ollama")
	for _, tc := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"` + env.OllamaModel + `","messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"stream":true}`},
		{"/api/chat", `{"model":"` + env.OllamaModel + `","messages":[{"role":"user","content":"Hi"}],"options":{"num_predict":8}}`},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			u := mustUpstream(t, "ollama", env.OllamaURL, upstream.KindOllama)
			dials := countDials(u)
			t.Cleanup(u.Client.CloseIdleConnections)
			closed := make(chan struct{}, 1)
			aegis := start(t, &Gateway{Upstreams: []*upstream.Upstream{u}, closeHook: func() { closed <- struct{}{} }})
			for range 3 {
				streamThrough(t, aegis.URL+tc.path, tc.body)
				<-closed
			}
			if n := dials.Load(); n != 1 {
				t.Fatalf("3 requests opened %d connections to Ollama, want 1", n)
			}
		})
	}
}

package faulttest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/checks"
	"github.com/aegis-sentinel/aegis/internal/gateway"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"go.uber.org/goleak"
)

// fastStall keeps the suite quick where a stall is the fault under test:
// the fault timers are short and come from the policy, and no assertion
// depends on how long anything took.
const fastStall = "checks: {stall: {ttft: 300ms, gap: 300ms}}\n"

// patientStall is for tests whose upstream answers: its timers are far
// beyond any scheduling delay of a loaded machine, so a slow run cannot
// turn a healthy answer into a stall.
const patientStall = "checks: {stall: {ttft: 30s, gap: 30s}}\n"

// fake is a scripted llama-server: serve is called for each generating
// POST with its 1-based number; /health answers ok.
type fake struct {
	srv   *httptest.Server
	posts atomic.Int32
	// gone counts POSTs whose client (the gateway) went away before the
	// handler returned: the upstream request was cancelled.
	gone atomic.Int32

	mu   sync.Mutex
	sent bytes.Buffer // the text content the fake streamed, all attempts
}

func newFake(t *testing.T, serve func(f *fake, w http.ResponseWriter, r *http.Request, n int)) *fake {
	f := &fake{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			io.WriteString(w, `{"status":"ok"}`)
			return
		}
		n := int(f.posts.Add(1))
		// Reading the body to its end lets the server notice the gateway
		// hanging up, as a real server does.
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		serve(f, w, r, n)
		if r.Context().Err() != nil {
			f.gone.Add(1)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) sentText() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent.String()
}

// chunk streams one SSE content chunk and records its text as sent.
func (f *fake) chunk(w http.ResponseWriter, text string) {
	f.raw(w, "data: "+chatChunk(text)+"\n\n")
	f.mu.Lock()
	f.sent.WriteString(text)
	f.mu.Unlock()
}

// raw writes bytes as they are and flushes.
func (f *fake) raw(w http.ResponseWriter, s string) {
	io.WriteString(w, s)
	w.(http.Flusher).Flush()
}

func (f *fake) finish(w http.ResponseWriter) {
	f.raw(w, "data: "+finishChunk+"\n\ndata: [DONE]\n\n")
}

func sseHeader(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

func chatChunk(text string) string {
	b, _ := json.Marshal(map[string]any{"id": "chatcmpl-f", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text}, "finish_reason": nil}}})
	return string(b)
}

const finishChunk = `{"id":"chatcmpl-f","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`

// prefill returns the assistant prefill of a retried request: the text
// the client already has, which the retry must continue.
func prefill(r *http.Request) string {
	var req struct {
		Messages []struct{ Role, Content string }
	}
	json.NewDecoder(r.Body).Decode(&req)
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == "assistant" {
		return req.Messages[n-1].Content
	}
	return ""
}

// rig is a gateway in front of a fake, served by the real http.Server
// configuration.
type rig struct {
	t      *testing.T
	fake   *fake
	gw     *gateway.Gateway
	srv    *httptest.Server
	client *http.Client
}

func newRig(t *testing.T, f *fake, policyDoc string, tweak func(*gateway.Gateway)) *rig {
	t.Helper()
	return newRigServer(t, f, policyDoc, tweak, nil)
}

// newRigServer is newRig with a change to the http.Server before it
// starts.
func newRigServer(t *testing.T, f *fake, policyDoc string, tweak func(*gateway.Gateway), server func(*http.Server)) *rig {
	t.Helper()
	checks.RegisterDefault()
	p, err := policy.Parse([]byte(policyDoc), "fault suite", validator.Default)
	if err != nil {
		t.Fatal(err)
	}
	up, err := upstream.New("fake", f.srv.URL, upstream.KindLlamaServer)
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway.Gateway{Upstreams: []*upstream.Upstream{up}, Policy: p}
	if tweak != nil {
		tweak(g)
	}
	srv := httptest.NewUnstartedServer(g)
	srv.Config = gateway.NewServer(g, nil)
	if server != nil {
		server(srv.Config)
	}
	srv.Start()
	tr := &http.Transport{DisableCompression: true}
	r := &rig{t: t, fake: f, gw: g, srv: srv, client: &http.Client{Transport: tr}}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		srv.Close()
		up.Client.CloseIdleConnections()
	})
	return r
}

func (r *rig) post(body string, stream bool) *http.Response {
	r.t.Helper()
	if stream {
		body = strings.Replace(body, "{", `{"stream":true,`, 1)
	}
	req, _ := http.NewRequest("POST", r.srv.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	return resp
}

const ask = `{"model":"m","messages":[{"role":"user","content":"tell me"}]}`

// outcome is what a client made of one response.
type outcome struct {
	status  int
	content string
	code    string // the error code, "" when none
	message string
	aegis   map[string]json.RawMessage
	raw     []byte
}

// read reads a response whole and checks it decodes strictly: valid
// UTF-8, no lone surrogate escapes, every event JSON.
func read(t *testing.T, resp *http.Response, stream bool) outcome {
	t.Helper()
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	return parse(t, resp.StatusCode, raw, stream)
}

func parse(t *testing.T, status int, raw []byte, stream bool) outcome {
	t.Helper()
	o := outcome{status: status, raw: raw}
	if !utf8.Valid(raw) {
		t.Fatalf("the client got invalid UTF-8: %q", raw)
	}
	payloads := [][]byte{raw}
	if stream && status == http.StatusOK {
		payloads = nil
		sc := bufio.NewScanner(bytes.NewReader(raw))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if p, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok && string(p) != "[DONE]" {
				payloads = append(payloads, append([]byte(nil), p...))
			}
		}
	}
	for _, p := range payloads {
		if loneSurrogate(p) {
			t.Fatalf("the client got a lone surrogate escape: %s", p)
		}
		var m struct {
			Choices []struct {
				Delta   struct{ Content string }
				Message struct{ Content string }
			}
			Error *struct{ Code, Message string }
			Aegis map[string]json.RawMessage
		}
		if err := json.Unmarshal(p, &m); err != nil {
			t.Fatalf("not JSON: %q: %v", p, err)
		}
		for _, c := range m.Choices {
			o.content += c.Delta.Content + c.Message.Content
		}
		if m.Error != nil {
			o.code, o.message = m.Error.Code, m.Error.Message
		}
		if m.Aegis != nil {
			o.aegis = m.Aegis
		}
	}
	return o
}

func loneSurrogate(p []byte) bool {
	s := string(p)
	for i := strings.Index(s, `\u`); i >= 0 && i+6 <= len(s); {
		var r rune
		if _, err := fmt.Sscanf(s[i+2:i+6], "%04x", &r); err == nil {
			switch {
			case r >= 0xD800 && r < 0xDC00:
				var lo rune
				if i+12 > len(s) || s[i+6:i+8] != `\u` {
					return true
				}
				if _, err := fmt.Sscanf(s[i+8:i+12], "%04x", &lo); err != nil || lo < 0xDC00 || lo >= 0xE000 {
					return true
				}
				i += 6
			case r >= 0xDC00 && r < 0xE000:
				return true
			}
		}
		j := strings.Index(s[i+2:], `\u`)
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return false
}

// noLeaks runs body and then waits for goroutines and descriptors to
// come back to their level before it, and the live heap to come back
// near it. It waits on the counts themselves (polling), not on a clock
// measure of how long cleanup should take.
func noLeaks(t *testing.T, body func(t *testing.T)) {
	t.Helper()
	runtime.GC()
	opt, fd0, heap0 := goleak.IgnoreCurrent(), fds(), liveHeap()
	t.Run("case", body)
	deadline := time.Now().Add(30 * time.Second)
	for {
		leak, fd := goleak.Find(opt), fds()
		if leak == nil && fd <= fd0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leak: descriptors %d -> %d; goroutines: %v", fd0, fd, leak)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if heap := liveHeap(); heap > heap0+8<<20 {
		t.Fatalf("leak: live heap %d MB -> %d MB", heap0>>20, heap>>20)
	}
}

func fds() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

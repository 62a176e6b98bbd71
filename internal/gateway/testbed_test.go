package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// direct reads a stream straight from the upstream.
func direct(t *testing.T, url, body string, ndjson bool) streamed {
	t.Helper()
	return readStream(t, post(t, url, body), ndjson)
}

// TestTestbedIdentical: a temperature-0 streamed answer through Aegis has
// the same content as the same request sent directly, on llama-server and
// on Ollama's native and OpenAI-compatible APIs.
func TestTestbedIdentical(t *testing.T) {
	env := testbed.Require(t, "llama-cpu", "ollama")
	llama := mustUpstream(t, "llama", env.LlamaCPUURL, upstream.KindLlamaServer)
	ollama := mustUpstream(t, "ollama", env.OllamaURL, upstream.KindOllama)
	for _, tc := range []struct {
		name, base, path, body string
		up                     *upstream.Upstream
		ndjson                 bool
	}{
		{"llama-server chat", env.LlamaCPUURL, "/v1/chat/completions", `{"messages":[{"role":"user","content":"Tell me about the little dog."}],"stream":true,"temperature":0,"max_tokens":80,"cache_prompt":false}`, llama, false},
		{"llama-server completions", env.LlamaCPUURL, "/v1/completions", `{"prompt":"The cat sat","stream":true,"temperature":0,"max_tokens":60}`, llama, false},
		{"ollama /api/chat", env.OllamaURL, "/api/chat", `{"model":"` + env.OllamaModel + `","messages":[{"role":"user","content":"Once upon a time"}],"options":{"temperature":0,"num_predict":60}}`, ollama, true},
		{"ollama /api/generate", env.OllamaURL, "/api/generate", `{"model":"` + env.OllamaModel + `","prompt":"Lily and Ben","options":{"temperature":0,"num_predict":60}}`, ollama, true},
		{"ollama /v1", env.OllamaURL, "/v1/chat/completions", `{"model":"` + env.OllamaModel + `","messages":[{"role":"user","content":"The sun"}],"stream":true,"temperature":0,"max_tokens":60}`, ollama, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{tc.up}})
			want := direct(t, tc.base+tc.path, tc.body, tc.ndjson)
			got := readStream(t, post(t, srv.URL+tc.path, tc.body), tc.ndjson)
			if want.content == "" || got.content != want.content {
				t.Fatalf("through Aegis:\n%q\ndirect:\n%q", got.content, want.content)
			}
			if got.last["aegis"] == nil {
				t.Fatalf("no verdict in the final chunk: %v", got.last)
			}
			if !tc.ndjson && got.events[len(got.events)-1] != "[DONE]" {
				t.Fatal("no [DONE]")
			}
		})
	}
}

// TestTestbedKeepAliveMax: more sequential requests than llama-server's
// keep-alive max=100, through Aegis; none may fail.
func TestTestbedKeepAliveMax(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(t, "llama", env.LlamaCPUURL, upstream.KindLlamaServer)}})
	client := &http.Client{}
	defer client.CloseIdleConnections()
	for i := 0; i < 230; i++ {
		stream := i%2 == 0
		body := `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
		resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || strings.Contains(string(b), `"error"`) {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
	}
}

// TestTestbedDisconnect: a client that goes away cancels the upstream
// generation. A proxy between the gateway and the Vulkan (llvmpipe)
// llama-server sees whether the gateway gave up its request before the
// 400-token answer was whole (at about 100 tok/s it takes seconds, while
// noticing a closed client takes the gateway no time to speak of); the
// server's slot is then free. How soon it was freed is logged, not
// asserted: on a loaded machine it is a measurement, not a verdict.
func TestTestbedDisconnect(t *testing.T) {
	env := testbed.Require(t, "llama-vulkan")
	target, err := url.Parse(env.LlamaVulkanURL)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0) // the cancelled request's copy error is expected
	gaveUp := make(chan bool, 1)             // the gateway cancelled the generation's request
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" {
			// Deferred: the proxy ends a response the client gave up on
			// with a panic (http.ErrAbortHandler).
			defer func() { gaveUp <- r.Context().Err() != nil }()
		}
		// As the gateway's own pass-through does: without full duplex the
		// server may close the request body the proxy is still sending.
		http.NewResponseController(w).EnableFullDuplex()
		rp.ServeHTTP(w, r)
	}))
	defer proxy.Close()
	up := mustUpstream(t, "vulkan", env.LlamaVulkanURL, upstream.KindLlamaServer)
	via := mustUpstream(t, "vulkan", proxy.URL, upstream.KindLlamaServer)
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{via}})
	resp := post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Tell a long story."}],"stream":true,"temperature":0,"max_tokens":400,"id_slot":0}`)
	br := bufio.NewReader(resp.Body)
	var read strings.Builder
	for n := 0; n < 6; {
		line, err := br.ReadString('\n')
		read.WriteString(line)
		if err != nil {
			t.Fatalf("status %d, %d events, then %v:\n%s", resp.StatusCode, n, err, read.String())
		}
		if strings.HasPrefix(line, "data: ") {
			n++
		}
	}
	busy := func() bool {
		code, b, err := up.Get(t.Context(), "/slots")
		if err != nil || code != 200 {
			t.Fatalf("/slots: %d %v", code, err)
		}
		var slots []struct {
			ID           int  `json:"id"`
			IsProcessing bool `json:"is_processing"`
		}
		json.Unmarshal(b, &slots)
		for _, s := range slots {
			if s.ID == 0 {
				return s.IsProcessing
			}
		}
		t.Fatal("no slot 0")
		return false
	}
	if !busy() {
		t.Fatal("slot 0 not processing while streaming")
	}
	resp.Body.Close()
	t0 := time.Now()
	select {
	case cancelled := <-gaveUp:
		if !cancelled {
			t.Fatal("the gateway read the upstream's answer to its end after the client went away")
		}
	case <-time.After(time.Minute): // a hang, not a timing assertion
		t.Fatal("the gateway's upstream request neither ended nor was cancelled")
	}
	// The slot frees once the server notices; a poll, as llama-server
	// announces nothing, bounded only against a hang.
	for giveUp := time.Now().Add(time.Minute); busy(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(giveUp) {
			t.Fatal("slot 0 still processing a minute after the gateway cancelled")
		}
	}
	t.Logf("slot freed %s after the disconnect", time.Since(t0))
}

// TestTestbedJSONRepair: the client asks for JSON in the prompt only, with
// the default policy: the prompt-constraint compiler turns "Reply in JSON
// only" into the json_syntax check, so the answer is buffered whole. The
// tiny model answers prose, the retry asks llama-server for
// grammar-constrained JSON (response_format json_object), and the client
// receives only the valid document.
func TestTestbedJSONRepair(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	up := mustUpstream(t, "llama", env.LlamaCPUURL, upstream.KindLlamaServer)
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}})
	body := `{"messages":[{"role":"user","content":"Reply in JSON only: the name of the girl."}],"temperature":0,"max_tokens":120,"stream":true}`
	// The direct answer is not JSON.
	if d := direct(t, env.LlamaCPUURL+"/v1/chat/completions", body, false); json.Valid([]byte(d.content)) {
		t.Fatalf("the model answered JSON unprompted (%q): the test proves nothing", d.content)
	}
	s := readStream(t, post(t, srv.URL+"/v1/chat/completions", body), false)
	var m meta
	json.Unmarshal(s.last["aegis"], &m)
	if !json.Valid([]byte(s.content)) || m.Attempts < 2 || len(m.Repaired) == 0 {
		t.Fatalf("content %q meta %+v", s.content, m)
	}
	t.Logf("repaired in %d attempts: %q", m.Attempts, s.content)
}

// recordingProxy forwards to target and keeps the body of every request,
// so a test can see what Aegis asked the upstream for on each attempt.
func recordingProxy(t *testing.T, target string) (string, func() []map[string]json.RawMessage) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	tr := upstream.NewClient().Transport.(*http.Transport)
	rp.Transport = tr
	t.Cleanup(tr.CloseIdleConnections) // no connection outlives the test
	var mu sync.Mutex
	var bodies []map[string]json.RawMessage
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m map[string]json.RawMessage
		json.Unmarshal(b, &m)
		mu.Lock()
		bodies = append(bodies, m)
		mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.ContentLength = int64(len(b))
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s.URL, func() []map[string]json.RawMessage {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(bodies)
	}
}

// TestTestbedOllamaRetry: on the real Ollama, a request that asks for JSON
// in the prompt only gets the json_syntax check (default policy); the tiny
// model answers prose, so the first attempt fails, and the retry must ask
// Ollama for constrained JSON (format on the native API, response_format
// on its OpenAI API). The answer is then either repaired (the client gets
// only a valid document) or halted with aegis_invalid_json once the
// retries are spent (the client gets none of the rejected text).
func TestTestbedOllamaRetry(t *testing.T) {
	env := testbed.Require(t, "ollama")
	for _, tc := range []struct {
		name, path, body string
		ndjson           bool
		constrained      func(map[string]json.RawMessage) bool
	}{
		{"native /api/chat", "/api/chat", `{"model":"` + env.OllamaModel + `","messages":[{"role":"user","content":"Reply in JSON only: the name of the girl."}],"options":{"temperature":0,"num_predict":24}}`, true,
			func(m map[string]json.RawMessage) bool { return string(m["format"]) == `"json"` }},
		{"OpenAI /v1/chat/completions", "/v1/chat/completions", `{"model":"` + env.OllamaModel + `","messages":[{"role":"user","content":"Reply in JSON only: the name of the girl."}],"stream":true,"temperature":0,"max_tokens":24}`, false,
			func(m map[string]json.RawMessage) bool {
				return strings.Contains(string(m["response_format"]), `"json_object"`)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			via, sent := recordingProxy(t, env.OllamaURL)
			srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(t, "ollama", via, upstream.KindOllama)}})
			if d := direct(t, env.OllamaURL+tc.path, tc.body, tc.ndjson); d.content == "" || json.Valid([]byte(d.content)) {
				t.Fatalf("the direct answer is %q: the first attempt would not fail, the test proves nothing", d.content)
			}
			s := readStream(t, post(t, srv.URL+tc.path, tc.body), tc.ndjson)
			reqs := sent()
			if len(reqs) < 2 {
				t.Fatalf("%d upstream requests: the failed first attempt was not retried (content %q)", len(reqs), s.content)
			}
			if tc.constrained(reqs[0]) {
				t.Fatal("the first attempt was already constrained")
			}
			for i, r := range reqs[1:] {
				if !tc.constrained(r) {
					t.Fatalf("retry %d did not ask for constrained JSON: %v", i+1, r)
				}
			}
			var m meta
			if s.errEv != nil {
				raw := s.errEv["aegis"]
				json.Unmarshal(raw, &m)
				code := string(s.errEv["error"])
				if !strings.Contains(code, "aegis_invalid_json") || s.content != "" {
					t.Fatalf("halted with %s after content %q", code, s.content)
				}
				t.Logf("halted after %d attempts: %s", m.Attempts, code)
			} else {
				json.Unmarshal(s.last["aegis"], &m)
				if len(m.Repaired) == 0 || !json.Valid([]byte(s.content)) {
					t.Fatalf("neither repaired nor halted: content %q meta %+v", s.content, m)
				}
				t.Logf("repaired in %d attempts: %q", m.Attempts, s.content)
			}
			if m.Attempts != len(reqs) {
				t.Fatalf("verdict says %d attempts, the upstream saw %d requests", m.Attempts, len(reqs))
			}
		})
	}
}

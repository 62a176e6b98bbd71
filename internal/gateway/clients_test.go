package gateway

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestRoot: GET and HEAD / answer 200 like the upstream kind, without a
// token, so heartbeat clients (the Ollama CLI's HEAD /) work.
func TestRoot(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		kind         upstream.Kind
		status       int
		body         string
	}{
		{"ollama GET", http.MethodGet, upstream.KindOllama, 200, "Ollama is running"},
		{"ollama HEAD", http.MethodHead, upstream.KindOllama, 200, ""},
		{"llama-server GET", http.MethodGet, upstream.KindLlamaServer, 200, "Aegis is running"},
		{"POST refused", http.MethodPost, upstream.KindOllama, 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := mustUpstream(t, "u", "http://127.0.0.1:1", tc.kind)
			srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, AuthToken: "tok"})
			req, _ := http.NewRequest(tc.method, srv.URL+"/", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == 200 && string(b) != tc.body {
				t.Fatalf("body %q, want %q", b, tc.body)
			}
		})
	}
}

// TestHaltIsFinal: every halt says X-Should-Retry: false and uses a
// status the common clients do not retry on their own (403), except the
// unavailability halts, which keep their 5xx.
func TestHaltIsFinal(t *testing.T) {
	notJSON := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write(sseBody(chatChunk("never json"), finishChunk)) })
	down := mustUpstream(t, "down", "http://127.0.0.1:1", upstream.KindLlamaServer)
	block := func(context.Context, *validator.Request) *validator.Verdict {
		return &validator.Verdict{Verdict: validator.Fail, Reason: validator.ReasonPromptInjection, Action: validator.ActionBlock}
	}
	for _, tc := range []struct {
		name   string
		g      *Gateway
		path   string
		body   string
		status int
	}{
		{"output check", &Gateway{Upstreams: []*upstream.Upstream{notJSON}, Policy: requireJSON(t, "max_retries: 0\n")}, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 403},
		{"input block", &Gateway{Upstreams: []*upstream.Upstream{notJSON}, InputCheck: block}, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 403},
		{"upstream down", &Gateway{Upstreams: []*upstream.Upstream{down}}, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, start(t, tc.g).URL+tc.path, tc.body)
			readAllBody(t, resp)
			if resp.StatusCode != tc.status || resp.Header.Get(HeaderShouldRetry) != "false" {
				t.Fatalf("status %d (want %d), %s: %q", resp.StatusCode, tc.status, HeaderShouldRetry, resp.Header.Get(HeaderShouldRetry))
			}
		})
	}
}

// TestNonStreamKeepsFields: the body assembled for a non-streaming client
// keeps every member the upstream streamed (reasoning_content, logprobs,
// unknown top-level members) and adds none (tool calls get no "index").
func TestNonStreamKeepsFields(t *testing.T) {
	chunk := func(delta, extra string) string {
		return `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","x_server":"kept",` +
			`"choices":[{"index":0,"delta":` + delta + `,"logprobs":{"content":[` + extra + `]},"finish_reason":null}]}`
	}
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(sseBody(
			chunk(`{"role":"assistant","reasoning_content":"think "}`, `{"token":"a","logprob":-1}`),
			chunk(`{"reasoning_content":"more"}`, `{"token":"b","logprob":-2}`),
			chunk(`{"content":"Hi"}`, `{"token":"Hi","logprob":-0.5}`),
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":null}]}`,
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`))
	})
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}})
	resp := post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"logprobs":true,`+
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`)
	b := readAllBody(t, resp)
	var out struct {
		XServer string `json:"x_server"`
		Choices []struct {
			Message struct {
				Content          string                       `json:"content"`
				ReasoningContent string                       `json:"reasoning_content"`
				ToolCalls        []map[string]json.RawMessage `json:"tool_calls"`
			} `json:"message"`
			Logprobs struct {
				Content []struct{ Token string } `json:"content"`
			} `json:"logprobs"`
		} `json:"choices"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	c := out.Choices[0]
	if out.XServer != "kept" || c.Message.ReasoningContent != "think more" || c.Message.Content != "Hi" || out.Usage.TotalTokens != 7 {
		t.Fatalf("fields lost: %s", b)
	}
	if len(c.Logprobs.Content) != 3 || c.Logprobs.Content[2].Token != "Hi" {
		t.Fatalf("logprobs: %s", b)
	}
	if len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0]["index"] != nil {
		t.Fatalf("tool calls: %s", b)
	}
}

// TestChoices: n > 1 without streaming sends one upstream request per
// choice (none carrying n), checks each, and answers with n choices; a
// choice that fails halts the request; n > 1 with streaming is refused.
func TestChoices(t *testing.T) {
	var calls atomic.Int32
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var req map[string]json.RawMessage
		json.NewDecoder(r.Body).Decode(&req)
		if _, ok := req["n"]; ok {
			http.Error(w, `{"error":{"message":"Only one completion choice is allowed"}}`, 400)
			return
		}
		n := calls.Add(1)
		text := `{"answer":` + strconv.Itoa(int(n)) + `}`
		if n == 4 {
			text = "not json" // the second request's second choice
		}
		w.Write(sseBody(chatChunk(text), `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`))
	})
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, Policy: requireJSON(t, "max_retries: 0\n")})
	resp := post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n":2}`)
	b := readAllBody(t, resp)
	var out struct {
		Choices []struct {
			Index   int
			Message struct{ Content string }
		}
		Usage struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 2 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	for i, c := range out.Choices {
		if c.Index != i || c.Message.Content != `{"answer":`+strconv.Itoa(i+1)+`}` {
			t.Fatalf("choice %d: %+v in %s", i, c, b)
		}
	}
	if out.Usage.PromptTokens != 5 || out.Usage.CompletionTokens != 4 {
		t.Fatalf("usage %+v", out.Usage)
	}
	resp = post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n":2}`)
	b = readAllBody(t, resp)
	if resp.StatusCode != 403 || !strings.Contains(string(b), "aegis_invalid_json") || resp.Header.Get(HeaderShouldRetry) != "false" {
		t.Fatalf("a failing choice: %d %s", resp.StatusCode, b)
	}
	// Streaming: one stream, each choice's chunks with its index and one id.
	calls.Store(4) // the next two answers are JSON
	st := readStream(t, post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n":2,"stream":true}`), false)
	byIndex, ids := map[int]string{}, map[string]bool{}
	for _, ev := range st.events {
		var c struct {
			ID      string
			Choices []struct {
				Index int
				Delta struct{ Content string }
			}
		}
		if json.Unmarshal([]byte(ev), &c) == nil && len(c.Choices) > 0 {
			ids[c.ID] = true
			byIndex[c.Choices[0].Index] += c.Choices[0].Delta.Content
		}
	}
	if st.status != 200 || st.errEv != nil || len(ids) != 1 || byIndex[0] != `{"answer":5}` || byIndex[1] != `{"answer":6}` || st.events[len(st.events)-1] != "[DONE]" {
		t.Fatalf("streaming n=2: %d %v ids %v events %q", st.status, byIndex, ids, st.events)
	}
	// A choice that fails ends the stream with its error event.
	calls.Store(2) // the second choice is call 4: not JSON
	st = readStream(t, post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"n":2,"stream":true}`), false)
	if st.errEv == nil || st.events[len(st.events)-1] != "[DONE]" || !strings.Contains(string(st.errEv["error"]), "aegis_invalid_json") {
		t.Fatalf("streaming n=2 with a failing choice: %q", st.events)
	}
}

// TestTestbedChoicesLogprobs: n = 2 with logprobs, non-streaming, through
// Aegis to llama-server (which serves one choice per request): two
// choices, each with its logprobs.
func TestTestbedChoicesLogprobs(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(t, "llama", env.LlamaCPUURL, upstream.KindLlamaServer)}})
	resp := post(t, srv.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Once upon a time"}],"n":2,"max_tokens":12,"logprobs":true,"top_logprobs":2}`)
	b := readAllBody(t, resp)
	var out struct {
		Choices []struct {
			Index    int
			Message  struct{ Content string }
			Logprobs struct {
				Content []struct {
					Token       string
					TopLogprobs []json.RawMessage `json:"top_logprobs"`
				}
			}
		}
	}
	if err := json.Unmarshal(b, &out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 2 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	for i, c := range out.Choices {
		if c.Index != i || c.Message.Content == "" || len(c.Logprobs.Content) == 0 || len(c.Logprobs.Content[0].TopLogprobs) == 0 {
			t.Fatalf("choice %d lacks text or logprobs: %s", i, b)
		}
		var text string
		for _, lp := range c.Logprobs.Content {
			text += lp.Token
		}
		if text != c.Message.Content {
			t.Fatalf("choice %d: logprobs spell %q, content %q", i, text, c.Message.Content)
		}
	}
}

// TestDetectOnFirstContact: an upstream that was down when the gateway
// started is detected when it first answers.
func TestDetectOnFirstContact(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	up := mustUpstream(t, "later", "http://"+addr, upstream.KindUnknown)
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}})
	get := func() string {
		resp, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		return string(readAllBody(t, resp))
	}
	if got := get(); got != "Aegis is running" {
		t.Fatalf("while down: %q", got)
	}
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	ol := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/version" {
			w.Write([]byte(`{"version":"0.6.5"}`))
			return
		}
		http.NotFound(w, r)
	}))
	ol.Listener.Close()
	ol.Listener = ln
	ol.Start()
	defer ol.Close()
	if got := get(); got != "Ollama is running" {
		t.Fatalf("once up: %q", got)
	}
}

// TestOutcomes: each way a request ends publishes one outcome word, and
// a Halt event exactly when the outcome is halted or blocked, so the
// metrics, the dashboard and the incident log count the same requests.
func TestOutcomes(t *testing.T) {
	ok := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write(sseBody(chatChunk("fine"), finishChunk)) })
	bad := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"message":"bad sampler"}}`, http.StatusBadRequest)
	})
	notJSON := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write(sseBody(chatChunk("never json"), finishChunk)) })
	down := mustUpstream(t, "down", "http://127.0.0.1:1", upstream.KindLlamaServer)
	block := func(context.Context, *validator.Request) *validator.Verdict {
		return &validator.Verdict{Verdict: validator.Fail, Reason: validator.ReasonPromptInjection, Action: validator.ActionBlock}
	}
	chat := `{"messages":[{"role":"user","content":"x"}]}`
	for _, tc := range []struct {
		name    string
		g       *Gateway
		body    string
		outcome string
		halts   int
	}{
		{"released", &Gateway{Upstreams: []*upstream.Upstream{ok}}, chat, events.OutcomeReleased, 0},
		{"halted", &Gateway{Upstreams: []*upstream.Upstream{notJSON}, Policy: requireJSON(t, "max_retries: 0\n")}, chat, events.OutcomeHalted, 1},
		{"blocked", &Gateway{Upstreams: []*upstream.Upstream{ok}, InputCheck: block}, chat, events.OutcomeBlocked, 1},
		{"upstream down is a halt", &Gateway{Upstreams: []*upstream.Upstream{down}}, chat, events.OutcomeHalted, 1},
		{"upstream 4xx is rejected", &Gateway{Upstreams: []*upstream.Upstream{bad}}, chat, events.OutcomeRejected, 0},
		{"bad JSON is rejected", &Gateway{Upstreams: []*upstream.Upstream{ok}}, `{`, events.OutcomeRejected, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bus := &events.Bus{}
			sub := bus.Subscribe(64)
			defer sub.Close()
			tc.g.Events = bus
			readAllBody(t, post(t, start(t, tc.g).URL+"/v1/chat/completions", tc.body))
			halts := 0
			for {
				e := <-sub.C
				if e.Kind == events.Halt {
					halts++
				}
				if e.Kind == events.RequestFinished {
					if e.Outcome != tc.outcome || halts != tc.halts {
						t.Fatalf("outcome %q with %d halt events, want %q with %d", e.Outcome, halts, tc.outcome, tc.halts)
					}
					return
				}
			}
		})
	}
}

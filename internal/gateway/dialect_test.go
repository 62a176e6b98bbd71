package gateway

import (
	"encoding/json"
	"flag"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func body(t *testing.T, s string) rawBody {
	t.Helper()
	var b rawBody
	if err := json.Unmarshal([]byte(s), &b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDialectEdits: every request edit of a retry, per dialect.
func TestDialectEdits(t *testing.T) {
	schema := json.RawMessage(`{"type":"object"}`)
	for _, tc := range []struct {
		name string
		d    dialect
		body string
		edit func(d dialect, b rawBody)
		want string
	}{
		{"chat note", dialectChat, `{"messages":[{"role":"user","content":"hi"}]}`,
			func(d dialect, b rawBody) { d.continueWith(b, "NOTE", "") },
			`{"messages":[{"content":"NOTE","role":"system"},{"role":"user","content":"hi"}]}`},
		{"chat continued", dialectChat, `{"messages":[{"role":"user","content":"hi"}]}`,
			func(d dialect, b rawBody) { d.continueWith(b, "NOTE", "Once") },
			`{"messages":[{"content":"NOTE","role":"system"},{"role":"user","content":"hi"},{"content":"Once","role":"assistant"}]}`},
		{"ollama chat continued", dialectOllamaChat, `{"messages":[{"role":"user","content":"hi"}]}`,
			func(d dialect, b rawBody) { d.continueWith(b, "NOTE", "Once") },
			`{"messages":[{"content":"NOTE","role":"system"},{"role":"user","content":"hi"},{"content":"Once","role":"assistant"}]}`},
		{"completions continued", dialectCompletions, `{"prompt":"The cat"}`,
			func(d dialect, b rawBody) { d.continueWith(b, "NOTE", " sat") }, `{"prompt":"The cat sat"}`},
		{"generate continued", dialectOllamaGenerate, `{"prompt":"The cat","system":"Be brief."}`,
			func(d dialect, b rawBody) { d.continueWith(b, "NOTE", " sat") }, `{"prompt":"The cat sat","system":"NOTE\nBe brief."}`},
		{"generate no system", dialectOllamaGenerate, `{"prompt":"The cat"}`,
			func(d dialect, b rawBody) { d.continueWith(b, "NOTE", "") }, `{"prompt":"The cat","system":"NOTE"}`},

		{"chat json schema", dialectChat, `{}`,
			func(d dialect, b rawBody) { d.constrainJSON(b, upstream.KindLlamaServer, schema) },
			`{"response_format":{"json_schema":{"name":"response","schema":{"type":"object"}},"type":"json_schema"}}`},
		{"chat json object", dialectChat, `{}`,
			func(d dialect, b rawBody) { d.constrainJSON(b, upstream.KindOpenAI, nil) }, `{"response_format":{"type":"json_object"}}`},
		{"completions llama-server schema", dialectCompletions, `{}`,
			func(d dialect, b rawBody) { d.constrainJSON(b, upstream.KindLlamaServer, schema) }, `{"json_schema":{"type":"object"}}`},
		{"completions llama-server object", dialectCompletions, `{}`,
			func(d dialect, b rawBody) { d.constrainJSON(b, upstream.KindLlamaServer, nil) }, `{"json_schema":{"type":"object"}}`},
		{"completions other server", dialectCompletions, `{}`,
			func(d dialect, b rawBody) { d.constrainJSON(b, upstream.KindOpenAI, schema) }, `{}`},
		{"ollama schema", dialectOllamaChat, `{}`,
			func(d dialect, b rawBody) { d.constrainJSON(b, upstream.KindOllama, schema) }, `{"format":{"type":"object"}}`},
		{"ollama json", dialectOllamaGenerate, `{}`,
			func(d dialect, b rawBody) { d.constrainJSON(b, upstream.KindOllama, nil) }, `{"format":"json"}`},

		{"chat llama-server anti-repeat", dialectChat, `{}`,
			func(d dialect, b rawBody) { d.antiRepeat(b, upstream.KindLlamaServer) },
			`{"dry_allowed_length":2,"dry_base":1.75,"dry_multiplier":0.8,"dry_penalty_last_n":256,"repeat_last_n":256,"repeat_penalty":1.15}`},
		{"completions other anti-repeat", dialectCompletions, `{}`,
			func(d dialect, b rawBody) { d.antiRepeat(b, upstream.KindOpenAI) }, `{"frequency_penalty":0.6,"presence_penalty":0.3}`},
		{"ollama anti-repeat keeps options", dialectOllamaChat, `{"options":{"seed":1}}`,
			func(d dialect, b rawBody) { d.antiRepeat(b, upstream.KindOllama) },
			`{"options":{"repeat_last_n":256,"repeat_penalty":1.3,"seed":1}}`},

		{"chat budget", dialectChat, `{"max_tokens":10,"max_completion_tokens":3,"n_predict":-1}`,
			func(d dialect, b rawBody) { d.shrinkBudget(b, 4) }, `{"max_completion_tokens":1,"max_tokens":6,"n_predict":-1}`},
		{"chat no budget", dialectChat, `{"max_tokens":null}`,
			func(d dialect, b rawBody) { d.shrinkBudget(b, 4) }, `{"max_tokens":null}`},
		{"ollama budget", dialectOllamaGenerate, `{"options":{"num_predict":10}}`,
			func(d dialect, b rawBody) { d.shrinkBudget(b, 4) }, `{"options":{"num_predict":6}}`},
		{"ollama no budget", dialectOllamaChat, `{"max_tokens":10}`,
			func(d dialect, b rawBody) { d.shrinkBudget(b, 4) }, `{"max_tokens":10}`},

		{"chat stream for a streaming client", dialectChat, `{"stream":false}`,
			func(d dialect, b rawBody) { d.streamBody(b, true) }, `{"stream":true}`},
		{"completions usage for a non-streaming client", dialectCompletions, `{"stream_options":{"x":1}}`,
			func(d dialect, b rawBody) { d.streamBody(b, false) }, `{"stream":true,"stream_options":{"include_usage":true,"x":1}}`},
		{"ollama stream", dialectOllamaChat, `{"stream":false}`,
			func(d dialect, b rawBody) { d.streamBody(b, false) }, `{"stream":true}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := body(t, tc.body)
			tc.edit(tc.d, b)
			if got := string(b.encode()); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestDialectDecode: what the gateway reads of each API's request.
func TestDialectDecode(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		d         dialect
		model     string
		stream    bool
		maxTokens int
		format    string
		prompt    string
		err       string
	}{
		{name: "chat", d: dialectChat, raw: `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, model: "m", stream: true, prompt: "hi"},
		{name: "chat without messages", d: dialectChat, raw: `{"model":"m","messages":[]}`, err: "messages must not be empty"},
		{name: "completions array prompt", d: dialectCompletions, raw: `{"model":"m","prompt":["a","b"],"max_tokens":5}`, model: "m", maxTokens: 5, prompt: "ab"},
		{name: "completions bad prompt", d: dialectCompletions, raw: `{"prompt":3}`, err: "prompt must be a string or an array of strings"},
		{name: "ollama chat streams by default", d: dialectOllamaChat, raw: `{"model":"m","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":7},"format":"json"}`, model: "m", stream: true, maxTokens: 7, format: "json_object", prompt: "hi"},
		{name: "ollama chat needs a model", d: dialectOllamaChat, raw: `{"messages":[{"role":"user","content":"hi"}]}`, err: "model is required"},
		{name: "generate not streamed, schema", d: dialectOllamaGenerate, raw: `{"model":"m","prompt":"p","system":"s","stream":false,"format":{"type":"object"}}`, model: "m", format: "json_schema", prompt: "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.d.decode([]byte(tc.raw), body(t, tc.raw))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			format := ""
			if r.vreq.ResponseFormat != nil {
				format = r.vreq.ResponseFormat.Type
			}
			last := r.vreq.Messages[len(r.vreq.Messages)-1].Content
			if r.model != tc.model || r.stream != tc.stream || r.vreq.MaxTokens != tc.maxTokens || format != tc.format || last != tc.prompt {
				t.Errorf("got model %q stream %v max %d format %q prompt %q", r.model, r.stream, r.vreq.MaxTokens, format, last)
			}
		})
	}
}

// TestDialectRequestShape: n choices, Ollama's load idiom and the
// upstream each API needs.
func TestDialectRequestShape(t *testing.T) {
	for _, tc := range []struct {
		name      string
		d         dialect
		body      string
		n         int
		nErr      bool
		generates bool
	}{
		{"chat n", dialectChat, `{"n":3}`, 3, false, true},
		{"chat n too large", dialectChat, `{"n":17}`, 0, true, true},
		{"completions n null", dialectCompletions, `{"n":null}`, 1, false, true},
		{"ollama chat ignores n", dialectOllamaChat, `{"n":3,"messages":[{"role":"user"}]}`, 1, false, true},
		{"ollama chat load", dialectOllamaChat, `{"model":"m"}`, 1, false, false},
		{"ollama chat unload", dialectOllamaChat, `{"model":"m","messages":[],"keep_alive":0}`, 1, false, false},
		{"generate", dialectOllamaGenerate, `{"model":"m"}`, 1, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := body(t, tc.body)
			n, err := tc.d.choices(b)
			if n != tc.n || (err != nil) != tc.nErr {
				t.Errorf("choices = %d, %v", n, err)
			}
			if g := tc.d.generates(b); g != tc.generates {
				t.Errorf("generates = %v", g)
			}
		})
	}
	for _, d := range dialects {
		_, errOllama := d.upstreamPath(upstream.KindOllama)
		_, errLlama := d.upstreamPath(upstream.KindLlamaServer)
		// Ollama serves chat and completions, not Messages or Responses.
		ollamaLacks := d == dialectMessages || d == dialectResponses
		if (errOllama != nil) != ollamaLacks || (errLlama != nil) != strings.HasPrefix(d.String(), "/api/") {
			t.Errorf("%s: upstreamPath ollama %v, llama-server %v", d, errOllama, errLlama)
		}
	}
}

// TestDialectBodies: the non-streamed answer and the error bodies each
// API spells, against golden files.
func TestDialectBodies(t *testing.T) {
	tpl := template{id: "chatcmpl-1", model: "stories", created: 1795327087, fingerprint: "b1", createdAt: "2026-11-24T16:00:00Z", set: true}
	idx := 0
	var calls, native toolAcc
	calls.acc.Add(toolcalls.Delta{Index: &idx, ID: "c0", Type: "function", Name: "f", Arguments: json.RawMessage(`"{\"a\":1}"`)}, 0)
	native.acc.Add(toolcalls.Delta{Name: "f", Arguments: json.RawMessage(`{}`), Whole: true}, 0)
	m := &meta{RequestID: "aegis-1", Attempts: 2}
	for _, tc := range []struct {
		name   string
		d      dialect
		chunks []string // streamed payloads the non-streamed answer carries members of
		tail   string   // top-level members of the closing chunks
		out    output
	}{
		{"chat", dialectChat, []string{`{"choices":[{"index":0,"delta":{"content":"Hi","reasoning_content":"r"},"logprobs":{"content":[1]}}]}`},
			`{"usage":{"completion_tokens":1},"timings":{"predicted_n":1}}`, output{text: "Hi", reasoning: "r"}},
		{"chat tool calls", dialectChat, nil, `{}`, output{tools: calls, finish: "tool_calls"}},
		{"completions", dialectCompletions, []string{`{"choices":[{"index":0,"text":"Hi","logprobs":{"tokens":["Hi"]}}]}`}, `{}`, output{text: "Hi", finish: "length"}},
		{"ollama chat", dialectOllamaChat, []string{`{"message":{"role":"assistant","content":"Hi","thinking":"t"},"done":false}`},
			`{"eval_count":1,"done_reason":"stop"}`, output{text: "Hi", reasoning: "t", tools: native}},
		{"ollama generate", dialectOllamaGenerate, []string{`{"response":"H","thinking":"a"}`, `{"response":"i","thinking":"b"}`},
			`{"eval_count":2}`, output{text: "Hi", reasoning: "ab"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var acc fieldAcc
			for _, p := range tc.chunks {
				acc.add(1, tc.d, []byte(p))
			}
			out := tc.out
			out.tpl, out.acc = &tpl, &acc
			name := strings.ReplaceAll(tc.name, " ", "-")
			validatortest.Golden(t, "dialect-"+name+".json", append(tc.d.body(body(t, tc.tail), &out).encode(), '\n'), *update)
			e := apiError{Message: "stopped", Type: "aegis_halted", Code: "aegis_invalid_json"}
			var errs []byte
			for _, v := range []any{tc.d.errorBody(e, nil, false), tc.d.errorBody(e, m, true)} {
				b, err := json.Marshal(v)
				if err != nil {
					t.Fatal(err)
				}
				errs = append(append(errs, b...), '\n')
			}
			errs = tc.d.appendEnd(tc.d.frame(errs, []byte(`{"a":1}`)))
			validatortest.Golden(t, "dialect-"+name+".error", errs, *update)
		})
	}
}

// FuzzDialectDecode feeds arbitrary request bodies to every dialect's
// decoder, seeded from TestDialectDecode: no panic, and a decoded request
// always has its prompt for the checks.
func FuzzDialectDecode(f *testing.F) {
	for _, s := range []string{`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, `{"model":"m","prompt":["a","b"],"max_tokens":5}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":7},"format":"json"}`,
		`{"model":"m","prompt":"p","system":"s","stream":false,"format":{"type":"object"}}`, `{"prompt":3}`, `{"messages":[]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b rawBody
		if json.Unmarshal([]byte(s), &b) != nil || b == nil {
			return // the handler answers 400 before a dialect reads it
		}
		for _, d := range dialects {
			r, err := d.decode([]byte(s), b)
			if err == nil && (r.vreq == nil || len(r.vreq.Messages) == 0) {
				t.Fatalf("%s decoded %q without a prompt: %+v", d, s, r)
			}
		}
	})
}

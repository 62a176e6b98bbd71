package chunkscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/openai"
)

// want is what a case expects Scan to find, unescaped.
type want struct {
	text, finish, errRaw, id, model, fp, createdAt string
	reasoning                                      string
	created                                        int64
	calls                                          int
	done                                           bool
}

var cases = []struct {
	name   string
	f      Format
	in     string
	want   want
	failed bool
}{
	{name: "llama-server role chunk", f: Chat,
		in:   `{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"created":1732000000,"id":"chatcmpl-x","model":"stories","system_fingerprint":"b1-abc","object":"chat.completion.chunk"}`,
		want: want{id: "chatcmpl-x", model: "stories", fp: "b1-abc", created: 1732000000}},
	{name: "llama-server text chunk", f: Chat,
		in:   `{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" Once"}}],"created":1732000000,"id":"chatcmpl-x","model":"stories","system_fingerprint":"b1-abc","object":"chat.completion.chunk"}`,
		want: want{text: " Once", id: "chatcmpl-x", model: "stories", fp: "b1-abc", created: 1732000000}},
	{name: "escapes and surrogates", f: Chat,
		in:   `{"choices":[{"delta":{"content":"a\n\"b\"\\ \u00e9 \ud83d\ude00 \ud800x \/"}}]}`,
		want: want{text: "a\n\"b\"\\ é 😀 \uFFFDx /"}},
	{name: "invalid utf-8 becomes U+FFFD", f: Chat,
		in:   "{\"choices\":[{\"delta\":{\"content\":\"a\xffb\"}}]}",
		want: want{text: "a\uFFFDb"}},
	{name: "finish chunk with usage", f: Chat,
		in:   `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"usage":{"completion_tokens":128,"prompt_tokens":9},"timings":{"predicted_n":128}}`,
		want: want{finish: "stop"}},
	{name: "tool call delta", f: Chat,
		in:   `{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"a\":"}}]}}]}`,
		want: want{calls: 1}},
	{name: "only choice 0 is read", f: Chat,
		in:   `{"choices":[{"delta":{"content":"a"}},{"delta":{"content":"b"},"finish_reason":"length"}]}`,
		want: want{text: "a"}},
	{name: "case-insensitive names", f: Chat,
		in:   `{"Choices":[{"DELTA":{"Content":"x"}}],"ID":"i"}`,
		want: want{text: "x", id: "i"}},
	{name: "escaped member name", f: Chat,
		in:   `{"choices":[{"delta":{"con\u0074ent":"x"}}]}`,
		want: want{text: "x"}},
	{name: "last member wins, null clears content", f: Chat,
		in:   `{"choices":[{"delta":{"content":"a","content":null}}]}`,
		want: want{}},
	{name: "null keeps a string member", f: Chat,
		in:   `{"model":"m","model":null}`,
		want: want{model: "m"}},
	{name: "repeated choices merge element 0", f: Chat,
		in:   `{"choices":[{"delta":{"content":"a"}}],"choices":[{"finish_reason":"stop"}]}`,
		want: want{text: "a", finish: "stop"}},
	{name: "empty choices resets", f: Chat,
		in:   `{"choices":[{"delta":{"content":"a"}}],"choices":[]}`,
		want: want{}},
	{name: "in-band error", f: Chat,
		in:   `{"error":{"code":500,"message":"boom"}}`,
		want: want{errRaw: `{"code":500,"message":"boom"}`}},
	{name: "null error", f: Chat, in: `{"error":null}`, want: want{}},
	{name: "top-level null", f: Chat, in: `null`, want: want{}},
	{name: "completions text", f: Completions,
		in:   `{"choices":[{"text":" upon","index":0,"logprobs":null,"finish_reason":null}],"id":"cmpl-1","created":1,"model":"m"}`,
		want: want{text: " upon", id: "cmpl-1", model: "m", created: 1}},
	{name: "completions ignores delta", f: Completions,
		in:   `{"choices":[{"delta":{"content":"x"},"text":"y"}]}`,
		want: want{text: "y"}},
	{name: "ollama generate", f: Ollama,
		in:   `{"model":"stories","created_at":"2026-11-24T16:00:00.1Z","response":" a","done":false}`,
		want: want{text: " a", model: "stories", createdAt: "2026-11-24T16:00:00.1Z"}},
	{name: "ollama chat", f: Ollama,
		in:   `{"model":"stories","created_at":"t","message":{"role":"assistant","content":"hi"},"done":false}`,
		want: want{text: "hi", model: "stories", createdAt: "t"}},
	{name: "ollama message wins over response", f: Ollama,
		in:   `{"response":"r","message":{"content":"m"}}`,
		want: want{text: "m"}},
	{name: "ollama done", f: Ollama,
		in:   `{"model":"stories","created_at":"t","response":"","done":true,"done_reason":"stop","eval_count":12}`,
		want: want{model: "stories", createdAt: "t", done: true, finish: "stop"}},
	{name: "ollama tool calls", f: Ollama,
		in:   `{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}},null]},"done":false}`,
		want: want{calls: 2}},
	{name: "ollama error", f: Ollama, in: `{"error":"model not found"}`, want: want{errRaw: "model not found"}},
	{name: "ollama message null drops it", f: Ollama,
		in:   `{"message":{"content":"m"},"message":null,"response":"r"}`,
		want: want{text: "r"}},

	{name: "not json", f: Chat, in: `data: {}`, failed: true},
	{name: "empty", f: Chat, in: ``, failed: true},
	{name: "truncated", f: Chat, in: `{"choices":[{"delta":{"content":"a`, failed: true},
	{name: "trailing data", f: Chat, in: `{} {}`, failed: true},
	{name: "trailing comma", f: Chat, in: `{"a":1,}`, failed: true},
	{name: "top-level array", f: Chat, in: `[]`, failed: true},
	{name: "content of the wrong type", f: Chat, in: `{"choices":[{"delta":{"content":5}}]}`, failed: true},
	{name: "wrong type in another choice", f: Chat, in: `{"choices":[{},{"text":true}]}`, failed: true},
	{name: "created not an integer", f: Chat, in: `{"created":1.5}`, failed: true},
	{name: "created overflows", f: Chat, in: `{"created":9223372036854775808}`, failed: true},
	{name: "tool call index a string", f: Chat, in: `{"choices":[{"delta":{"tool_calls":[{"index":"0"}]}}]}`, failed: true},
	{name: "bad escape", f: Chat, in: `{"a":"\x"}`, failed: true},
	{name: "control character", f: Chat, in: "{\"a\":\"\x01\"}", failed: true},
	{name: "bad number", f: Chat, in: `{"a":01}`, failed: true},
	{name: "ollama done a string", f: Ollama, in: `{"done":"true"}`, failed: true},
	{name: "ollama error an object", f: Ollama, in: `{"error":{"m":1}}`, failed: true},
	{name: "deep but within the limit", f: Chat, in: `{"x":` + strings.Repeat("[", 9999) + strings.Repeat("]", 9999) + `}`},
	{name: "too deep", f: Chat, in: `{"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, failed: true},
	{name: "legacy function_call", f: Chat, in: `{"choices":[{"delta":{"function_call":{"name":"f","arguments":"{\"a\":"}},"finish_reason":null},{"delta":{"function_call":{"name":"g"}}}]}`, want: want{}},
	{name: "function_call twice, last kept", f: Chat, in: `{"choices":[{"delta":{"function_call":{"name":"f"},"Function_Call":null}}]}`, want: want{}},
}

func TestScan(t *testing.T) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := []byte(tc.in)
			var f Fields
			err := Scan(tc.f, p, &f)
			differential(t, tc.f, p)
			if tc.failed {
				if err == nil {
					t.Fatalf("Scan accepted %q", tc.in)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := want{
				text: str(p, f.Text), finish: str(p, f.FinishReason), id: str(p, f.ID), model: str(p, f.Model),
				fp: str(p, f.Fingerprint), createdAt: str(p, f.CreatedAt), created: f.Created, calls: f.ToolCallCount, done: f.Done,
			}
			if f.Error.Present() {
				got.errRaw = string(f.Error.Of(p))
				if tc.f == Ollama {
					got.errRaw = str(p, f.Error)
				}
			}
			if got != tc.want {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func str(p []byte, sp Span) string { return string(AppendString(nil, p, sp)) }

// refOpenAI and refOllama are the structs a gateway decodes chunks into
// with encoding/json; the scanner must read every chunk as they do.
type refOpenAI struct {
	ID          string `json:"id"`
	Created     int64  `json:"created"`
	Model       string `json:"model"`
	Fingerprint string `json:"system_fingerprint"`
	Choices     []struct {
		Delta struct {
			Content   *string           `json:"content"`
			ToolCalls []openai.ToolCall `json:"tool_calls"`
			RC        *string           `json:"reasoning_content"`
			R         *string           `json:"reasoning"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

// refOpenAIRaw keeps the tool calls as the raw array, to compare spans.
type refOpenAIRaw struct {
	Choices []struct {
		Delta struct {
			ToolCalls    json.RawMessage `json:"tool_calls"`
			FunctionCall json.RawMessage `json:"function_call"`
		} `json:"delta"`
	} `json:"choices"`
}

type refOllama struct {
	Model     string `json:"model"`
	CreatedAt string `json:"created_at"`
	Message   *struct {
		Content   string            `json:"content"`
		ToolCalls []json.RawMessage `json:"tool_calls"`
		Thinking  *string           `json:"thinking"`
	} `json:"message"`
	Response   *string `json:"response"`
	Thinking   *string `json:"thinking"`
	Done       bool    `json:"done"`
	DoneReason string  `json:"done_reason"`
	Error      string  `json:"error"`
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nullRaw(r json.RawMessage) string {
	if string(r) == "null" {
		return ""
	}
	return string(r)
}

// differential holds Scan to encoding/json's reading of p.
func differential(t *testing.T, f Format, p []byte) {
	t.Helper()
	var got Fields
	err := Scan(f, p, &got)
	var w want
	var wantCalls, wantFC string
	var refErr error
	if f == Ollama {
		var o refOllama
		refErr = json.Unmarshal(p, &o)
		w = want{model: o.Model, createdAt: o.CreatedAt, done: o.Done, finish: o.DoneReason, errRaw: o.Error}
		switch {
		case o.Message != nil:
			w.text, w.calls, w.reasoning = o.Message.Content, len(o.Message.ToolCalls), deref(o.Message.Thinking)
			if o.Message.ToolCalls != nil {
				b, _ := json.Marshal(o.Message.ToolCalls)
				wantCalls = string(b)
			}
		case o.Response != nil:
			w.text, w.reasoning = *o.Response, deref(o.Thinking)
		default:
			w.reasoning = deref(o.Thinking)
		}
	} else {
		var o refOpenAI
		var r refOpenAIRaw
		refErr = json.Unmarshal(p, &o)
		w = want{id: o.ID, model: o.Model, fp: o.Fingerprint, created: o.Created, errRaw: nullRaw(o.Error)}
		if len(o.Choices) > 0 {
			c := o.Choices[0]
			w.text, w.finish, w.calls = deref(c.Delta.Content), deref(c.FinishReason), len(c.Delta.ToolCalls)
			if f == Completions {
				w.text = deref(c.Text)
			} else if w.reasoning = deref(c.Delta.RC); c.Delta.RC == nil {
				w.reasoning = deref(c.Delta.R)
			}
			if json.Unmarshal(p, &r) == nil && len(r.Choices) > 0 {
				wantCalls = nullRaw(r.Choices[0].Delta.ToolCalls)
				wantFC = nullRaw(r.Choices[0].Delta.FunctionCall)
			}
		}
	}
	if (err == nil) != (refErr == nil) {
		t.Fatalf("%s %q: Scan error %v, encoding/json error %v", f, p, err, refErr)
	}
	if err != nil {
		return
	}
	g := want{text: str(p, got.Text), finish: str(p, got.FinishReason), id: str(p, got.ID), model: str(p, got.Model),
		fp: str(p, got.Fingerprint), createdAt: str(p, got.CreatedAt), created: got.Created, calls: got.ToolCallCount, done: got.Done,
		reasoning: str(p, got.Reasoning)}
	if got.Error.Present() {
		g.errRaw = string(got.Error.Of(p))
		if f == Ollama {
			g.errRaw = str(p, got.Error)
		}
	}
	if g != w {
		t.Fatalf("%s %q:\nScan          %+v\nencoding/json %+v", f, p, g, w)
	}
	gotCalls := ""
	if got.ToolCalls.Present() {
		gotCalls = string(got.ToolCalls.Of(p))
		if f == Ollama { // compare element by element, compacted
			var els []json.RawMessage
			if e := json.Unmarshal(got.ToolCalls.Of(p), &els); e != nil {
				t.Fatalf("tool calls span %q: %v", gotCalls, e)
			}
			b, _ := json.Marshal(els)
			gotCalls = string(b)
		}
	}
	if gotCalls != wantCalls {
		t.Fatalf("%s %q: tool calls %q, encoding/json %q", f, p, gotCalls, wantCalls)
	}
	gotFC := ""
	if got.FunctionCall.Present() {
		gotFC = nullRaw(got.FunctionCall.Of(p))
	}
	if gotFC != wantFC {
		t.Fatalf("%s %q: function_call %q, encoding/json %q", f, p, gotFC, wantFC)
	}
}

func FuzzScan(f *testing.F) {
	for _, tc := range cases {
		f.Add(uint8(tc.f), []byte(tc.in))
	}
	f.Add(uint8(Chat), []byte(`{"choices":[{"delta":{"reasoning_content":"a","reasoning":"b"}}],"usage":{"x":1},"prompt_progress":{"total":3}}`))
	f.Add(uint8(Ollama), []byte(`{"message":{"content":"","thinking":"t"},"thinking":"u","eval_count":2}`))
	f.Fuzz(func(t *testing.T, format uint8, p []byte) {
		fm := Format(format % 3)
		differential(t, fm, p)
		// Unescaping appends to what the buffer held.
		var fl Fields
		if Scan(fm, p, &fl) == nil && fl.Text.Present() {
			pre := []byte("pre")
			if out := AppendString(pre, p, fl.Text); !bytes.HasPrefix(out, pre) {
				t.Fatalf("AppendString lost the buffer's contents: %q", out)
			}
		}
	})
}

// TestAppendStringAllocs: the text of a plain chunk reaches the caller's
// buffer with no allocation, and so does a chunk with escapes.
func TestAppendStringAllocs(t *testing.T) {
	for _, in := range []string{cases[1].in, cases[2].in} {
		p := []byte(in)
		buf := make([]byte, 0, 256)
		var f Fields
		n := testing.AllocsPerRun(100, func() {
			if err := Scan(Chat, p, &f); err != nil {
				t.Fatal(err)
			}
			buf = AppendString(buf[:0], p, f.Text)
		})
		if n != 0 {
			t.Errorf("%d allocations per chunk for %s", int(n), in)
		}
	}
}

func TestFormatString(t *testing.T) {
	for f, s := range map[Format]string{Chat: "chat", Completions: "completions", Ollama: "ollama", 9: "Format(9)"} {
		if f.String() != s {
			t.Errorf("%d: %q", f, f.String())
		}
	}
}

func TestAppendQuoted(t *testing.T) {
	for _, s := range []string{"", "plain", "a\"b\\c", "<tag>&amp;", "\b\f\n\r\t\x00\x1f\x7f", "é 😀 \u2028\u2029", "bad \xff\xfe utf-8 \xed\xa0\x80"} {
		quotedMatches(t, []byte(s))
	}
}

// quotedMatches holds AppendQuoted to json.Marshal.
func quotedMatches(t *testing.T, s []byte) {
	t.Helper()
	want, _ := json.Marshal(string(s))
	if got := AppendQuoted([]byte("x"), s); string(got) != "x"+string(want) {
		t.Fatalf("AppendQuoted(%q) = %s, json.Marshal: %s", s, got[1:], want)
	}
}

func FuzzAppendQuoted(f *testing.F) {
	for _, tc := range cases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(quotedMatches)
}

// strBytes is str one byte at a time, the reference the word-at-a-time
// scan is held to: the string's end (or where it failed) and whether it
// has escapes.
func strBytes(p []byte, i int) (end int, escaped, ok bool) {
	for i++; i < len(p); {
		switch c := p[i]; {
		case c == '"':
			return i + 1, escaped, true
		case c == '\\':
			escaped = true
			if i+1 >= len(p) {
				return len(p), false, false
			}
			switch p[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(p) || hex4(p[i+2:i+6]) < 0 {
					return i, false, false
				}
				i += 6
			default:
				return i, false, false
			}
		case c < 0x20:
			return i, false, false
		default:
			i++
		}
	}
	return len(p), false, false
}

// strMatches checks str against strBytes at every quote of p.
func strMatches(t *testing.T, p []byte) {
	t.Helper()
	for i, c := range p {
		if c != '"' {
			continue
		}
		s := scanner{p: p, i: i}
		sp, esc, err := s.str()
		end, wantEsc, ok := strBytes(p, i)
		switch {
		case (err == nil) != ok:
			t.Fatalf("str(%q) at %d: error %v, byte loop ok=%v", p, i, err, ok)
		case ok && (sp != Span{i, end} || esc != wantEsc || s.i != end):
			t.Fatalf("str(%q) at %d: span %v escaped %v next %d, byte loop ends at %d escaped %v", p, i, sp, esc, s.i, end, wantEsc)
		case !ok && err.(*Error).Offset != end:
			t.Fatalf("str(%q) at %d: fails at %d, byte loop at %d", p, i, err.(*Error).Offset, end)
		}
	}
}

func TestStrWordAtATime(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
	}{
		{"empty string", `""`},
		{"short", `"abc"`},
		{"quote in the first word", `"ab"cdefghij"`},
		{"backslash in the second word", `"abcdefghij\klm"`},
		{"control byte after a word", "\"abcdefgh\x1fij\""},
		{"quote at a word's last byte", `"abcdefg"`},
		{"high bytes are plain", "\"\x80\x9f\xa0\xff\xe2\x80\xa8abcdefgh\"x"},
		{"bytes 0x20 and 0x7f are plain", "\" \x7f \x7f \x7f \x7f \x7f\""},
		{"a stop right after a borrow", "\"\x01\x22\x5c\x00\x22\x5c\x00\x22"},
		{"escapes across words", `"abcdefg\u00e9hijklmn\"opqrstu\\"`},
		{"bad escape after a word", `"abcdefghij\x"`},
		{"unterminated", `"abcdefghijklmnop`},
		{"cut escape", `"abcdefghij\`},
	} {
		t.Run(tc.name, func(t *testing.T) { strMatches(t, []byte(tc.in)) })
	}
}

// FuzzStr holds the word-at-a-time string scan to the byte loop at every
// quote of every input.
func FuzzStr(f *testing.F) {
	for _, tc := range cases {
		f.Add([]byte(tc.in))
	}
	f.Add([]byte("\"abcdefg\"hijklmnop\\q\x01\""))
	f.Fuzz(strMatches)
}

// refCounts is what a gateway decodes a closing chunk's token counts into
// with encoding/json.
type refCounts struct {
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Timings *struct {
		PredictedN int `json:"predicted_n"`
	} `json:"timings"`
	EvalCount int `json:"eval_count"`
}

var countsCases = []struct {
	name   string
	in     string
	want   Counts
	failed bool
}{
	{name: "llama-server closing chunk", in: `{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"usage":{"completion_tokens":128,"prompt_tokens":9,"total_tokens":137},"timings":{"prompt_n":9,"predicted_n":128,"predicted_ms":12.5}}`,
		want: Counts{Usage: 128, Predicted: 128}},
	{name: "ollama final line", in: `{"model":"stories","done":true,"eval_count":57,"eval_duration":1234}`, want: Counts{Eval: 57}},
	{name: "no counts", in: `{"choices":[]}`},
	{name: "null chunk", in: `null`},
	{name: "null usage reads 0", in: `{"usage":{"completion_tokens":5},"usage":null}`},
	{name: "repeated usage objects merge", in: `{"usage":{"completion_tokens":5},"usage":{"prompt_tokens":1}}`, want: Counts{Usage: 5}},
	{name: "null count keeps the earlier one", in: `{"eval_count":3,"eval_count":null}`, want: Counts{Eval: 3}},
	{name: "case-insensitive and escaped names", in: `{"USAGE":{"Completion_Tokens":7},"timing\u0073":{"predicted_N":8}}`, want: Counts{Usage: 7, Predicted: 8}},
	{name: "negative count", in: `{"eval_count":-4}`, want: Counts{Eval: -4}},
	{name: "fractional count", in: `{"eval_count":1.5}`, failed: true},
	{name: "exponent count", in: `{"usage":{"completion_tokens":1e2}}`, failed: true},
	{name: "count too large", in: `{"eval_count":9223372036854775808}`, failed: true},
	{name: "string count", in: `{"timings":{"predicted_n":"8"}}`, failed: true},
	{name: "usage not an object", in: `{"usage":[1]}`, failed: true},
	{name: "array chunk", in: `[{"eval_count":1}]`, failed: true},
	{name: "invalid JSON after the counts", in: `{"eval_count":1,}`, failed: true},
	{name: "trailing data", in: `{"eval_count":1} x`, failed: true},
}

func TestReadCounts(t *testing.T) {
	for _, tc := range countsCases {
		t.Run(tc.name, func(t *testing.T) {
			var got Counts
			err := ReadCounts([]byte(tc.in), &got)
			if (err != nil) != tc.failed {
				t.Fatalf("error %v, want failed=%v", err, tc.failed)
			}
			if err == nil && got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			countsDifferential(t, []byte(tc.in))
		})
	}
}

// countsDifferential holds ReadCounts to encoding/json on p.
func countsDifferential(t *testing.T, p []byte) {
	t.Helper()
	var got Counts
	err := ReadCounts(p, &got)
	var ref refCounts
	refErr := json.Unmarshal(p, &ref)
	if (err != nil) != (refErr != nil) {
		t.Fatalf("%q: error %v, encoding/json %v", p, err, refErr)
	}
	if err != nil {
		return
	}
	want := Counts{Eval: int64(ref.EvalCount)}
	if ref.Usage != nil {
		want.Usage = int64(ref.Usage.CompletionTokens)
	}
	if ref.Timings != nil {
		want.Predicted = int64(ref.Timings.PredictedN)
	}
	if got != want {
		t.Fatalf("%q: got %+v, encoding/json %+v", p, got, want)
	}
}

func FuzzReadCounts(f *testing.F) {
	for _, tc := range countsCases {
		f.Add([]byte(tc.in))
	}
	for _, tc := range cases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, p []byte) { countsDifferential(t, p) })
}

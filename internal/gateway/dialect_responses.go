package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// responsesDialect is OpenAI's Responses API: POST /v1/responses,
// instructions and input items in, named Server-Sent Events
// (response.created, response.output_item.added, response.output_text
// .delta, response.function_call_arguments.delta, response.reasoning_text
// .delta, response.output_item.done, response.completed) out. Text and
// reasoning deltas are output the checks read; function_call items are
// tool calls, held until they are whole and cleared; event types Aegis
// does not know pass through untouched, in order.
type responsesDialect struct{ eventWire }

// The dialect's one value (an interface value made once).
var dialectResponses dialect = responsesDialect{eventWire{path: "/v1/responses",
	final: [3]string{"response.completed", "response.incomplete", "response.failed"}, served: "OpenAI Responses"}}

func (responsesDialect) decode(raw []byte, body rawBody) (request, error) {
	return decodeResponses(raw)
}

// continueWith puts the note before the instructions and the released
// text last in the input as the assistant's message.
func (responsesDialect) continueWith(b rawBody, note, prefix string) {
	var ins string
	json.Unmarshal(b["instructions"], &ins)
	if ins != "" {
		note += "\n\n" + ins
	}
	b.set("instructions", note)
	if prefix == "" {
		return
	}
	var items []json.RawMessage
	if in := b["input"]; len(in) > 0 && in[0] == '"' {
		var s string
		json.Unmarshal(in, &s)
		user, _ := json.Marshal(map[string]string{"type": "message", "role": "user", "content": s})
		items = append(items, user)
	} else {
		json.Unmarshal(in, &items)
	}
	// Items carry their type: llama-server refuses an item without one.
	pre, _ := json.Marshal(map[string]string{"type": "message", "role": "assistant", "content": prefix})
	b.set("input", append(items, pre))
}

// constrainJSON: text.format, the Responses API's JSON mode.
func (responsesDialect) constrainJSON(b rawBody, kind upstream.Kind, schema json.RawMessage) {
	text := b.object("text")
	if schema != nil {
		text.set("format", map[string]any{"type": "json_schema", "name": "response", "schema": schema})
	} else {
		text.set("format", map[string]any{"type": "json_object"})
	}
	b.set("text", text)
}

// antiRepeat: llama-server reads its own sampling members on this route;
// the Responses API has none that break loops.
func (responsesDialect) antiRepeat(b rawBody, kind upstream.Kind) {
	if kind == upstream.KindLlamaServer {
		sseWire{}.antiRepeat(b, kind)
	}
}

func (responsesDialect) shrinkBudget(b rawBody, carried int) {
	if n, ok := budgetLeft(b["max_output_tokens"], carried); ok {
		b.set("max_output_tokens", n)
	}
}

// responsesEvent is one streamed event, as far as the gateway reads it.
type responsesEvent struct {
	Type        string `json:"type"`
	OutputIndex *int   `json:"output_index"`
	ItemID      string `json:"item_id"`
	Item        *struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"item"`
	Delta    string `json:"delta"`
	Response *struct {
		Status            string `json:"status"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	} `json:"response"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// parse reads one event: text and reasoning deltas are the chunk's text,
// a function_call item's events are tool-call chunks (held with the
// call), response.completed or .incomplete ends the answer and
// response.failed is the upstream's error. Items are known by their id
// (llama-server's deltas carry no output_index); events for an item
// never added, added twice or of the wrong kind are refused with what is
// wrong and where.
func (responsesDialect) parse(p []byte, c *chunk) error {
	c.reset(p)
	c.parts.closing = false
	if ok, err := responsesDelta(p, c); ok {
		return err
	}
	var ev responsesEvent
	if err := json.Unmarshal(p, &ev); err != nil {
		return fmt.Errorf("upstream sent a Responses event that is not JSON: %w", err)
	}
	s := &c.parts
	item := func() (int, string, error) {
		i, ok := s.ids[ev.ItemID]
		if !ok {
			return 0, "", fmt.Errorf("upstream Responses stream: %s for item %q, which was never added", ev.Type, ev.ItemID)
		}
		kind, err := s.at(i)
		if err != nil {
			return 0, "", fmt.Errorf("upstream Responses stream: %s for item %q: %w", ev.Type, ev.ItemID, err)
		}
		return i, kind, nil
	}
	want := func(i int, kind, is string) error {
		if kind != is {
			return fmt.Errorf("upstream Responses stream: %w", kindMismatch(ev.Type, i, kind))
		}
		return nil
	}
	switch ev.Type {
	case "response.output_item.added":
		if ev.Item == nil {
			return fmt.Errorf("upstream sent response.output_item.added without an item")
		}
		i := len(s.kinds)
		if ev.OutputIndex != nil {
			i = *ev.OutputIndex
		}
		if _, dup := s.ids[ev.Item.ID]; dup && ev.Item.ID != "" {
			return fmt.Errorf("upstream Responses stream: item %q was added twice", ev.Item.ID)
		}
		if err := s.open(i, ev.Item.Type); err != nil {
			return fmt.Errorf("upstream Responses stream: %w", err)
		}
		if s.ids == nil {
			s.ids = map[string]int{}
		}
		s.ids[ev.Item.ID] = i
		if ev.Item.Type == "function_call" {
			id := ev.Item.CallID
			if id == "" {
				id = ev.Item.ID
			}
			s.callDelta(c, i, id, ev.Item.Name, ev.Item.Arguments, false)
		}
	case "response.output_text.delta":
		i, kind, err := item()
		if err != nil {
			return err
		}
		if err := want(i, kind, "message"); err != nil {
			return err
		}
		c.setText(ev.Delta)
	case "response.reasoning_text.delta", "response.reasoning_summary_text.delta":
		i, kind, err := item()
		if err != nil {
			return err
		}
		if err := want(i, kind, "reasoning"); err != nil {
			return err
		}
		c.setReasoning(ev.Delta)
	case "response.function_call_arguments.delta":
		i, kind, err := item()
		if err != nil {
			return err
		}
		if err := want(i, kind, "function_call"); err != nil {
			return err
		}
		s.callDelta(c, i, "", "", ev.Delta, false)
	case "response.function_call_arguments.done":
		i, kind, err := item()
		if err != nil {
			return err
		}
		if err := want(i, kind, "function_call"); err != nil {
			return err
		}
		c.heldWithCall()
	case "response.output_item.done":
		if ev.Item == nil {
			return fmt.Errorf("upstream sent response.output_item.done without an item")
		}
		i, ok := s.ids[ev.Item.ID]
		if !ok {
			return fmt.Errorf("upstream Responses stream: response.output_item.done for item %q, which was never added", ev.Item.ID)
		}
		kind, err := s.close(i)
		if err != nil {
			return fmt.Errorf("upstream Responses stream: %w", err)
		}
		if kind == "function_call" {
			c.heldWithCall()
		}
		s.closing = true
	case "response.output_text.done", "response.content_part.done", "response.reasoning_text.done", "response.reasoning_summary_text.done":
		s.closing = true
	case "response.created", "response.in_progress":
		c.progress = true
	case "response.completed", "response.incomplete":
		if i := s.unclosed(); i >= 0 {
			return fmt.Errorf("upstream Responses stream: %s before output item %d was done", ev.Type, i)
		}
		c.usage = true
		switch {
		case ev.Response != nil && ev.Response.IncompleteDetails != nil && ev.Response.IncompleteDetails.Reason == "max_output_tokens":
			c.setFinish("length")
		case s.tools > 0:
			c.setFinish("tool_calls")
		default:
			c.setFinish("stop")
		}
	case "response.failed":
		c.errMsg = "response.failed"
		if ev.Response != nil && ev.Response.Error != nil {
			c.errMsg = ev.Response.Error.Code + ": " + ev.Response.Error.Message
		}
	case "error":
		c.errMsg = ev.Code + ": " + ev.Message
	}
	return nil
}

// responsesDelta reads an output text delta spelled as llama-server
// spells them ({"type":"response.output_text.delta","item_id":"...",
// "delta":"..."}) without decoding it; false for any other payload.
func responsesDelta(p []byte, c *chunk) (bool, error) {
	i, ok := cutPrefix(p, 0, `{"type":"response.output_text.delta","item_id":`)
	if !ok {
		return false, nil
	}
	id, ok := quoted(p, i)
	if !ok || bytes.IndexByte(p[id.Start:id.End], '\\') >= 0 {
		return false, nil
	}
	j, ok := cutPrefix(p, id.End, `,"delta":`)
	if !ok {
		return false, nil
	}
	sp, ok := quoted(p, j)
	if !ok || string(p[sp.End:]) != "}" {
		return false, nil
	}
	s := &c.parts
	n, ok := s.ids[string(p[id.Start+1:id.End-1])]
	if !ok {
		return true, fmt.Errorf("upstream Responses stream: response.output_text.delta for item %s, which was never added", p[id.Start:id.End])
	}
	kind, err := s.at(n)
	if err != nil {
		return true, fmt.Errorf("upstream Responses stream: response.output_text.delta for item %s: %w", p[id.Start:id.End], err)
	}
	if kind != "message" {
		return true, fmt.Errorf("upstream Responses stream: %w", kindMismatch("response.output_text.delta", n, kind))
	}
	c.buf = chunkscan.AppendString(c.buf[:0], p, sp)
	c.text, c.hasText = c.buf, len(c.buf) > 0
	return true, nil
}

// appendChunk spells text as an output text delta, or, with finish, the
// response.completed that ends the answer. The releaser cuts the
// upstream's own deltas with appendCut instead, which keeps their item.
func (responsesDialect) appendChunk(dst []byte, t *template, text []byte, finish string) []byte {
	if finish != "" {
		dst = append(dst, `{"type":"response.completed","response":{"object":"response","status":`...)
		if finish == "length" {
			return append(dst, `"incomplete","incomplete_details":{"reason":"max_output_tokens"}}}`...)
		}
		return append(dst, `"completed"}}`...)
	}
	dst = append(dst, `{"type":"response.output_text.delta","delta":`...)
	dst = chunkscan.AppendQuoted(dst, text)
	return append(dst, '}')
}

// appendCut spells the delta raw with text in place of its own: the same
// event type, item and indexes.
func (responsesDialect) appendCut(dst, raw, text []byte) []byte {
	var m rawBody
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return responsesDialect{}.appendChunk(dst, nil, text, "")
	}
	m.set("delta", string(text))
	delete(m, "obfuscation")
	return append(dst, m.encode()...)
}

// errorBody is OpenAI's error object, which the Responses API answers
// with; in a stream the releaser frames it as response.failed (frame).
func (responsesDialect) errorBody(e apiError, m *meta, coded bool) any {
	return errorBody{Error: e, Aegis: m}
}

// frame names each event after its type; an error object, which the
// gateway writes when it halts mid-stream, goes out as the
// response.failed event that ends a Responses stream.
func (w responsesDialect) frame(dst, p []byte) []byte {
	if !bytes.HasPrefix(p, []byte(`{"error":`)) {
		return w.eventWire.frame(dst, p)
	}
	var eb struct {
		Error apiError        `json:"error"`
		Aegis json.RawMessage `json:"aegis"`
	}
	if json.Unmarshal(p, &eb) != nil {
		return w.eventWire.frame(dst, p)
	}
	type failed struct {
		Object string `json:"object"`
		Status string `json:"status"`
		Error  struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	ev := struct {
		Type     string          `json:"type"`
		Response failed          `json:"response"`
		Aegis    json.RawMessage `json:"aegis,omitempty"`
	}{Type: "response.failed", Response: failed{Object: "response", Status: "failed"}, Aegis: eb.Aegis}
	ev.Response.Error.Code, ev.Response.Error.Message = eb.Error.Code, eb.Error.Message
	b, _ := json.Marshal(ev)
	return appendNamed(dst, ev.Type, b)
}

// collect keeps the response object of the stream's events: the last
// one (response.completed) holds the whole answer.
func (responsesDialect) collect(a *fieldAcc, m rawBody) {
	if r, ok := m["response"]; ok && len(r) > 0 && r[0] == '{' {
		a.parts.head = m.object("response")
	}
}

// body is the response object of response.completed, with the text and
// reasoning the checks passed: when a hidden retry continued the
// released text, that prefix goes before the first output text;
// reasoning the policy hides takes its reasoning items with it.
func (responsesDialect) body(top rawBody, answers ...*output) rawBody {
	ans := answers[0]
	b := ans.acc.parts.head.clone()
	if b == nil {
		b = rawBody{}
	}
	// A non-streamed response says when it completed; llama-server's
	// streamed response.completed does not: the time the answer was
	// assembled stands in.
	if _, ok := b["completed_at"]; !ok && string(b["status"]) == `"completed"` {
		b.set("completed_at", time.Now().Unix())
	}
	var out []rawBody
	json.Unmarshal(b["output"], &out)
	kept := out[:0]
	var built, thought string
	for _, it := range out {
		if string(it["type"]) == `"reasoning"` {
			if ans.reasoning == "" {
				continue // hidden by the policy (or none): the item goes too
			}
			thought += itemText(it)
		} else {
			built += itemText(it)
		}
		kept = append(kept, it)
	}
	out = kept
	// The checked reasoning is the one source of what the client reads
	// of it.
	if thought != ans.reasoning {
		for _, it := range out {
			if string(it["type"]) == `"reasoning"` {
				it.set("content", []any{map[string]string{"type": "reasoning_text", "text": ans.reasoning}})
				break
			}
		}
	}
	if prefix, ok := strings.CutSuffix(ans.text, built); ok && prefix != "" {
		prefixFirstText(out, prefix)
	}
	if len(out) > 0 || b["output"] != nil {
		b.set("output", out)
	}
	return b
}

// itemText is the text the checks read of one output item: a message's
// output text, a reasoning item's text.
func itemText(it rawBody) string {
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(it["content"], &parts)
	s := ""
	for _, p := range parts {
		if p.Type == "output_text" || p.Type == "reasoning_text" {
			s += p.Text
		}
	}
	return s
}

// prefixFirstText puts prefix before the first output text of the
// items; false when they hold none.
func prefixFirstText(out []rawBody, prefix string) bool {
	for _, it := range out {
		var parts []rawBody
		json.Unmarshal(it["content"], &parts)
		for _, p := range parts {
			var typ, text string
			json.Unmarshal(p["type"], &typ)
			if typ != "output_text" {
				continue
			}
			json.Unmarshal(p["text"], &text)
			p.set("text", prefix+text)
			it.set("content", parts)
			return true
		}
	}
	return false
}

package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// messagesDialect is Anthropic's Messages API: POST /v1/messages, a
// system prompt and messages of content blocks in, named Server-Sent
// Events (message_start, content_block_start / delta / stop,
// message_delta, message_stop, ping) out. Text and thinking deltas are
// output the checks read; tool_use blocks are tool calls, held until
// they are whole and cleared; signatures, redacted thinking and event
// types Aegis does not know pass through untouched, in order.
type messagesDialect struct{ eventWire }

// The dialect's one value (an interface value made once).
var dialectMessages dialect = messagesDialect{eventWire{path: "/v1/messages", final: [3]string{"message_stop"}, served: "Anthropic Messages"}}

func (messagesDialect) decode(raw []byte, body rawBody) (request, error) { return decodeMessages(raw) }

// continueWith puts the note before the system prompt (a string, or a
// list of text blocks) and the released text last as the assistant's
// prefill, which the Messages API continues.
func (messagesDialect) continueWith(b rawBody, note, prefix string) {
	switch sys := b["system"]; {
	case len(sys) == 0 || string(sys) == "null":
		b.set("system", note)
	case sys[0] == '"':
		var s string
		json.Unmarshal(sys, &s)
		b.set("system", note+"\n\n"+s)
	default:
		var blocks []json.RawMessage
		json.Unmarshal(sys, &blocks)
		first, _ := json.Marshal(map[string]string{"type": "text", "text": note})
		b.set("system", append([]json.RawMessage{first}, blocks...))
	}
	if prefix != "" {
		var msgs []json.RawMessage
		json.Unmarshal(b["messages"], &msgs)
		pre, _ := json.Marshal(map[string]string{"role": "assistant", "content": prefix})
		b.set("messages", append(msgs, pre))
	}
}

// constrainJSON: the Messages API has no JSON mode; a llama-server
// upstream reads the chat API's response_format on this route too.
func (messagesDialect) constrainJSON(b rawBody, kind upstream.Kind, schema json.RawMessage) {
	if kind != upstream.KindLlamaServer {
		return
	}
	chatDialect{}.constrainJSON(b, kind, schema)
}

// antiRepeat: llama-server reads its own sampling members on this route;
// the Messages API has none that break loops.
func (messagesDialect) antiRepeat(b rawBody, kind upstream.Kind) {
	if kind == upstream.KindLlamaServer {
		sseWire{}.antiRepeat(b, kind)
	}
}

func (messagesDialect) shrinkBudget(b rawBody, carried int) {
	if n, ok := budgetLeft(b["max_tokens"], carried); ok {
		b.set("max_tokens", n)
	}
}

// messagesEvent is one streamed event, as far as the gateway reads it.
type messagesEvent struct {
	Type         string `json:"type"`
	Index        *int   `json:"index"`
	ContentBlock *struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content_block"`
	Delta *struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Thinking    string `json:"thinking"`
		PartialJSON string `json:"partial_json"`
		StopReason  string `json:"stop_reason"`
	} `json:"delta"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// parse reads one event: text and thinking deltas are the chunk's text,
// a tool_use block's start, input deltas and stop are tool-call chunks
// (held with the call), message_delta's stop_reason ends the answer.
// Events out of order are refused with what is wrong and where.
func (messagesDialect) parse(p []byte, c *chunk) error {
	c.reset(p)
	c.parts.closing = false
	if ok, err := messagesDelta(p, c); ok {
		return err
	}
	var ev messagesEvent
	if err := json.Unmarshal(p, &ev); err != nil {
		return fmt.Errorf("upstream sent a Messages event that is not JSON: %w", err)
	}
	s := &c.parts
	index := func() (int, error) {
		if ev.Index == nil {
			return 0, fmt.Errorf("upstream sent %s without an index", ev.Type)
		}
		return *ev.Index, nil
	}
	switch ev.Type {
	case "content_block_start":
		i, err := index()
		if err != nil {
			return err
		}
		if ev.ContentBlock == nil {
			return fmt.Errorf("upstream sent content_block_start %d without a content_block", i)
		}
		cb := ev.ContentBlock
		if err := s.open(i, cb.Type); err != nil {
			return fmt.Errorf("upstream Messages stream: %w", err)
		}
		if cb.Type == "tool_use" {
			in := string(cb.Input)
			// The whole input in the start: no input_json_delta follows.
			whole := in != "" && in != "{}" && in != "null"
			if !whole {
				in = ""
			}
			s.callDelta(c, i, cb.ID, cb.Name, in, whole)
		}
	case "content_block_delta":
		i, err := index()
		if err != nil {
			return err
		}
		kind, err := s.at(i)
		if err != nil {
			return fmt.Errorf("upstream Messages stream: %w", err)
		}
		if ev.Delta == nil {
			return fmt.Errorf("upstream sent content_block_delta %d without a delta", i)
		}
		switch d := ev.Delta; d.Type {
		case "text_delta":
			if kind != "text" {
				return fmt.Errorf("upstream Messages stream: %w", kindMismatch(d.Type, i, kind))
			}
			c.setText(d.Text)
		case "thinking_delta":
			if kind != "thinking" {
				return fmt.Errorf("upstream Messages stream: %w", kindMismatch(d.Type, i, kind))
			}
			c.setReasoning(d.Thinking)
		case "input_json_delta":
			if kind != "tool_use" {
				return fmt.Errorf("upstream Messages stream: %w", kindMismatch(d.Type, i, kind))
			}
			s.callDelta(c, i, "", "", d.PartialJSON, false)
		default: // signature_delta, citations and what comes later pass
			if kind == "tool_use" {
				c.heldWithCall()
			}
		}
	case "content_block_stop":
		i, err := index()
		if err != nil {
			return err
		}
		kind, err := s.close(i)
		if err != nil {
			return fmt.Errorf("upstream Messages stream: %w", err)
		}
		if kind == "tool_use" {
			c.heldWithCall()
		}
		s.closing = true
	case "message_start":
		c.usage = true
	case "ping":
		c.progress = true // the upstream is there, working
	case "message_delta":
		if i := s.unclosed(); i >= 0 {
			return fmt.Errorf("upstream Messages stream: message_delta before content block %d was stopped", i)
		}
		c.usage = true
		if ev.Delta != nil && ev.Delta.StopReason != "" {
			c.setFinish(finishOfStop(ev.Delta.StopReason))
		}
	case "error":
		c.errMsg = "an error event"
		if ev.Error != nil {
			c.errMsg = ev.Error.Type + ": " + ev.Error.Message
		}
	}
	return nil
}

// messagesDelta reads a text or thinking delta spelled as llama-server
// spells them ({"type":"content_block_delta","index":N,"delta":{"type":
// "text_delta","text":"..."}}) without decoding it; false for any other
// payload.
func messagesDelta(p []byte, c *chunk) (bool, error) {
	i, ok := cutPrefix(p, 0, `{"type":"content_block_delta","index":`)
	if !ok {
		return false, nil
	}
	n, j := 0, i
	for ; j < len(p) && j-i < 6 && p[j] >= '0' && p[j] <= '9'; j++ {
		n = n*10 + int(p[j]-'0')
	}
	if j == i || j-i >= 6 {
		return false, nil
	}
	kind, thinking := "text", false
	if j, ok = cutPrefix(p, j, `,"delta":{"type":"text_delta","text":`); !ok {
		if j, ok = cutPrefix(p, j, `,"delta":{"type":"thinking_delta","thinking":`); !ok {
			return false, nil
		}
		kind, thinking = "thinking", true
	}
	sp, ok := quoted(p, j)
	if !ok || string(p[sp.End:]) != "}}" {
		return false, nil
	}
	got, err := c.parts.at(n)
	if err != nil {
		return true, fmt.Errorf("upstream Messages stream: %w", err)
	}
	if got != kind {
		return true, fmt.Errorf("upstream Messages stream: %w", kindMismatch(kind+"_delta", n, got))
	}
	if thinking {
		c.rbuf = chunkscan.AppendString(c.rbuf[:0], p, sp)
		c.setThoughtBuf()
		return true, nil
	}
	c.buf = chunkscan.AppendString(c.buf[:0], p, sp)
	c.text, c.hasText = c.buf, len(c.buf) > 0
	return true, nil
}

// finishOfStop is the gateway's finish reason for a stop_reason.
func finishOfStop(stop string) string {
	switch stop {
	case "max_tokens":
		return "length"
	case "tool_use":
		return "tool_calls"
	}
	return "stop"
}

// stopOfFinish is the stop_reason for the gateway's finish reason.
func stopOfFinish(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls":
		return "tool_use"
	}
	return "end_turn"
}

// appendChunk spells text as a text delta of the first block, or, with
// finish, the message_delta that ends the answer. The releaser cuts the
// upstream's own deltas with appendCut instead, which keeps their block.
func (messagesDialect) appendChunk(dst []byte, t *template, text []byte, finish string) []byte {
	if finish != "" {
		dst = append(dst, `{"type":"message_delta","delta":{"stop_reason":`...)
		dst = chunkscan.AppendQuoted(dst, []byte(stopOfFinish(finish)))
		return append(dst, `,"stop_sequence":null},"usage":{"output_tokens":0}}`...)
	}
	dst = append(dst, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`...)
	dst = chunkscan.AppendQuoted(dst, text)
	return append(dst, `}}`...)
}

// appendCut spells the delta raw with text in place of its own, in the
// same block and of the same kind.
func (messagesDialect) appendCut(dst, raw, text []byte) []byte {
	var ev messagesEvent
	json.Unmarshal(raw, &ev)
	i, kind, field := 0, "text_delta", "text"
	if ev.Index != nil {
		i = *ev.Index
	}
	if ev.Delta != nil && ev.Delta.Type == "thinking_delta" {
		kind, field = "thinking_delta", "thinking"
	}
	dst = append(dst, `{"type":"content_block_delta","index":`...)
	dst = fmt.Appendf(dst, "%d", i)
	dst = append(dst, `,"delta":{"type":"`...)
	dst = append(dst, kind...)
	dst = append(dst, `","`...)
	dst = append(dst, field...)
	dst = append(dst, `":`...)
	dst = chunkscan.AppendQuoted(dst, text)
	return append(dst, `}}`...)
}

// messagesError is the Messages API's error body, with Aegis's code and
// verdict beside its type and message.
type messagesError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
		Code    string `json:"code,omitempty"`
	} `json:"error"`
	Aegis *meta `json:"aegis,omitempty"`
}

func (messagesDialect) errorBody(e apiError, m *meta, coded bool) any {
	return anthropicError(e, m)
}

// anthropicError spells e in the Messages API's shape: the error types
// its clients know for the gateway's own refusals, Aegis's type for its
// halts (with the code beside it).
func anthropicError(e apiError, m *meta) messagesError {
	b := messagesError{Type: "error", Aegis: m}
	b.Error.Type, b.Error.Message, b.Error.Code = e.Type, e.Message, e.Code
	switch e.Code {
	case "not_found", "model_not_found":
		b.Error.Type = "not_found_error"
	case "aegis_bad_request", "method_not_allowed", "unsupported_endpoint":
		b.Error.Type = "invalid_request_error"
	case "invalid_api_key":
		b.Error.Type = "authentication_error"
	case "aegis_overloaded":
		b.Error.Type = "overloaded_error"
	}
	return b
}

// collect assembles the message from the events (non-streaming).
func (messagesDialect) collect(a *fieldAcc, m rawBody) { a.parts.addMessages(m) }

// body is the message the events made, the text the checks passed in
// its text and thinking blocks.
func (messagesDialect) body(top rawBody, answers ...*output) rawBody {
	return answers[0].acc.parts.message(answers[0])
}

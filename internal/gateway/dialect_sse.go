package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/sse"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// sseWire is what the two OpenAI dialects share: Server-Sent Events
// framing, OpenAI's chunk identity and error object, n choices and
// OpenAI's sampling and budget members.
type sseWire struct {
	path   string
	format chunkscan.Format
}

func (w sseWire) String() string { return w.path }

func (w sseWire) upstreamPath(upstream.Kind) (string, error) { return w.path, nil }

func (sseWire) generates(rawBody) bool { return true }

// MaxChoices is the largest n a request may ask for.
const MaxChoices = 16

// choices reads "n" (default 1). Each choice is generated and checked as
// a request of its own (runChoices, runChoicesStream).
func (sseWire) choices(body rawBody) (int, error) {
	raw, ok := body["n"]
	if !ok || string(raw) == "null" {
		return 1, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil || n < 1 || n > MaxChoices {
		return 0, fmt.Errorf("n must be an integer from 1 to %d", MaxChoices)
	}
	return n, nil
}

func (sseWire) streamBody(b rawBody, clientStreams bool) {
	b.set("stream", true)
	if !clientStreams {
		so := b.object("stream_options")
		so.set("include_usage", true)
		b.set("stream_options", so)
	}
}

// antiRepeat: llama-server gets DRY and repeat_penalty over the last 256
// tokens, other servers frequency_penalty and presence_penalty.
func (sseWire) antiRepeat(b rawBody, kind upstream.Kind) {
	if kind == upstream.KindLlamaServer {
		b.set("dry_multiplier", 0.8)
		b.set("dry_base", 1.75)
		b.set("dry_allowed_length", 2)
		b.set("dry_penalty_last_n", 256)
		b.set("repeat_penalty", 1.15)
		b.set("repeat_last_n", 256)
		return
	}
	b.set("frequency_penalty", 0.6)
	b.set("presence_penalty", 0.3)
}

// budgetKeys are the request members that bound the number of generated
// tokens.
var budgetKeys = []string{"max_tokens", "max_completion_tokens", "n_predict"}

func (sseWire) shrinkBudget(b rawBody, carried int) {
	for _, k := range budgetKeys {
		if n, ok := budgetLeft(b[k], carried); ok {
			b.set(k, n)
		}
	}
}

// budgetLeft is a token limit raw lowered by carried, never below one;
// false when raw sets no limit (absent, null or -1).
func budgetLeft(raw json.RawMessage, carried int) (int, bool) {
	var n int
	if json.Unmarshal(raw, &n) != nil || n <= 0 {
		return 0, false
	}
	return max(n-carried, 1), true
}

// collect keeps the top-level members and those of choices[0] and its
// delta.
func (sseWire) collect(a *fieldAcc, m rawBody) {
	a.addTop(m, "")
	if delta, ok := a.addChoice(m); ok {
		a.addMsg(delta)
	}
}

func (sseWire) newStream(body io.ReadCloser) *upstream.Stream { return upstream.NewSSEStream(body) }

func (w sseWire) parse(p []byte, c *chunk) error {
	c.reset(p)
	if err := c.memo.Scan(w.format, p, &c.f); err != nil {
		return fmt.Errorf("upstream sent an event that is not JSON: %w", err)
	}
	f := &c.f
	if f.Error.Present() {
		c.errMsg = string(f.Error.Of(p))
		return nil
	}
	c.readText()
	var err error
	if f.ToolCallCount > 0 {
		if c.calls, err = toolcalls.AppendOpenAI(c.calls, f.ToolCalls.Of(p)); err != nil {
			return fmt.Errorf("upstream sent tool calls that do not decode: %w", err)
		}
	}
	if fc := f.FunctionCall; fc.Present() {
		if c.calls, err = toolcalls.AppendFunctionCall(c.calls, p[fc.Start:fc.End]); err != nil {
			return fmt.Errorf("upstream sent a function_call that does not decode: %w", err)
		}
	}
	c.hasTools = len(c.calls) > 0
	if f.FinishReason.Present() {
		if c.finishReason = c.str(f.FinishReason); c.finishReason != "" {
			c.finish = true
		}
	}
	return nil
}

func (sseWire) foreign(t *template, c *chunk, attempt int) bool { return t.foreign(c, attempt) }

func (sseWire) streamHeader(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

func (sseWire) frame(dst, p []byte) []byte { return sse.AppendData(dst, p) }

func (sseWire) appendEnd(dst []byte) []byte { return sse.AppendDone(dst) }

func (sseWire) errorBody(e apiError, m *meta, coded bool) any { return errorBody{Error: e, Aegis: m} }

// appendFinishReason appends a choice's finish_reason (null while the
// answer goes on) and its index.
func appendFinishReason(dst []byte, finish string) []byte {
	dst = append(dst, `"finish_reason":`...)
	if finish == "" {
		dst = append(dst, "null"...)
	} else {
		dst = chunkscan.AppendQuoted(dst, []byte(finish))
	}
	return append(dst, `,"index":0`...)
}

// appendIdentity closes the choices array and appends the answer's
// identity as a chunk of object spells it; the closing chunk carries no
// system_fingerprint.
func appendIdentity(dst []byte, t *template, object, finish string) []byte {
	dst = append(dst, `}],"created":`...)
	dst = strconv.AppendInt(dst, t.created, 10)
	dst = append(dst, `,"id":`...)
	dst = chunkscan.AppendQuoted(dst, []byte(t.id))
	dst = append(dst, `,"model":`...)
	dst = chunkscan.AppendQuoted(dst, []byte(t.model))
	dst = append(dst, `,"object":"`...)
	dst = append(dst, object...)
	dst = append(dst, '"')
	if t.fingerprint != "" && finish == "" {
		dst = append(dst, `,"system_fingerprint":`...)
		dst = chunkscan.AppendQuoted(dst, []byte(t.fingerprint))
	}
	return append(dst, '}')
}

// setIdentity gives an assembled body the answer's identity, as object.
func setIdentity(top rawBody, t *template, object string) {
	delete(top, "choices")
	top.set("id", t.id)
	top.set("created", t.created)
	top.set("model", t.model)
	if t.fingerprint != "" {
		top.set("system_fingerprint", t.fingerprint)
	}
	top.set("object", object)
}

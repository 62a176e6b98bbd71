package gateway

import (
	"strings"

	"github.com/aegis-sentinel/aegis/internal/toolcalls"
)

// The event model. Every dialect's decoder (streamReader.parse) reads one
// upstream payload into a chunk: the events that payload carries, in one
// record, with the payload itself (for the chunks that go out as the
// upstream sent them). The gateway's checks, hold-back, stall and
// keep-alive clocks, retries and verdict read only these events; the
// dialect's clientWriter spells what the gateway writes itself. A payload
// may carry several events at once (text and the finish, a tool-call
// piece and usage); a payload with none (a role chunk, a ping, an event
// type the decoder does not know) is passed through where it stands.
type eventKind uint8

// The kinds of event a payload carries, as a set.
const (
	// evText is a piece of the answer's text (chunk.text).
	evText eventKind = 1 << iota
	// evReasoning is a piece of the model's reasoning (chunk.reasoning):
	// llama-server's reasoning_content, other servers' reasoning,
	// Ollama's thinking, an Anthropic thinking block, a Responses
	// reasoning item.
	evReasoning
	// evToolCall is one or more pieces of tool calls (chunk.calls),
	// assembled by toolcalls.Accumulator and nowhere else.
	evToolCall
	// evFinish ends the answer (chunk.finishReason: "stop", "length",
	// "tool_calls", as chat completions spells them).
	evFinish
	// evUsage carries token counts or timings.
	evUsage
	// evProgress says the upstream works on the request without output
	// yet (llama-server's prompt_progress, Responses' in_progress).
	evProgress
	// evError is the upstream's error inside the stream (chunk.errMsg).
	evError
)

var eventNames = [...]string{"text", "reasoning", "tool_call", "finish", "usage", "progress", "error"}

// String names the kinds in k, joined by "+" ("none" for none).
func (k eventKind) String() string {
	if k == 0 {
		return "none"
	}
	var b strings.Builder
	for i, n := range eventNames {
		if k&(1<<i) != 0 {
			if b.Len() > 0 {
				b.WriteByte('+')
			}
			b.WriteString(n)
		}
	}
	return b.String()
}

// has reports whether k holds every kind of e.
func (k eventKind) has(e eventKind) bool { return k&e == e }

// events returns the kinds of event c carries.
func (c *chunk) events() eventKind {
	var k eventKind
	if c.hasText {
		k |= evText
	}
	if c.hasReasoning {
		k |= evReasoning
	}
	if c.hasTools {
		k |= evToolCall
	}
	if c.finish {
		k |= evFinish
	}
	if c.usage {
		k |= evUsage
	}
	if c.progress {
		k |= evProgress
	}
	if c.errMsg != "" {
		k |= evError
	}
	return k
}

// setText records a text event of s (copied into the chunk's buffer).
func (c *chunk) setText(s string) {
	c.buf = append(c.buf[:0], s...)
	c.text, c.hasText = c.buf, len(c.buf) > 0
}

// setReasoning records a reasoning event of s (copied).
func (c *chunk) setReasoning(s string) {
	c.rbuf = append(c.rbuf[:0], s...)
	c.reasoning, c.hasReasoning = c.rbuf, len(c.rbuf) > 0
}

// addCall records a tool-call event: one piece of one call. Its position
// among the pieces of this payload is the index of a piece that names
// none.
func (c *chunk) addCall(d toolcalls.Delta) {
	c.calls = append(c.calls, d)
	c.hasTools = true
}

// setFinish records the finish event with the reason, as chat completions
// spells it ("" reads as "stop").
func (c *chunk) setFinish(reason string) { c.finish, c.finishReason = true, reason }

// reasoningWriter is a clientWriter that spells a piece of reasoning as a
// chunk of its own: the gateway writes one when the release point cuts a
// held reasoning chunk (a writer that implements cutter spells the cut
// from the upstream's chunk instead). Reasoning rides in the same checked
// text as the answer, marked as reasoning (release.go), so one release
// point holds both.
type reasoningWriter interface {
	appendReasoning(dst []byte, t *template, text []byte) []byte
}

package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/sse"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// eventWire is what Anthropic's Messages and OpenAI's Responses share:
// Server-Sent Events whose "event:" field repeats the payload's "type",
// a stream that ends with an event of its own rather than "[DONE]", one
// answer per request, and an answer made of numbered parts (content
// blocks, output items) that open, take deltas and close.
type eventWire struct {
	path string
	// final are the event types that end the stream (an array: a
	// dialect is a comparable value).
	final [3]string
	// served names the API in the error an upstream without it gets.
	served string
}

func (w eventWire) String() string { return w.path }

// upstreamPath: Ollama has neither API (its server answers 404); every
// other upstream is asked on the same path, and one that lacks the API
// refuses the request with its own status.
func (w eventWire) upstreamPath(kind upstream.Kind) (string, error) {
	if kind == upstream.KindOllama {
		return "", fmt.Errorf("%s (%s) is not served by the Ollama upstream, which serves /api/chat, /api/generate and /v1/chat/completions; point the client at one of those, or at a llama-server upstream", w.path, w.served)
	}
	return w.path, nil
}

func (eventWire) generates(rawBody) bool { return true }

// choices: both APIs give one answer per request.
func (eventWire) choices(rawBody) (int, error) { return 1, nil }

// streamBody: both APIs report usage in their closing events, streamed or
// not.
func (eventWire) streamBody(b rawBody, clientStreams bool) { b.set("stream", true) }

func (w eventWire) newStream(body io.ReadCloser) *upstream.Stream {
	return upstream.NewEventStream(body, w.isFinal)
}

// isFinal reports whether the event named name with payload data ends the
// stream.
func (w eventWire) isFinal(name string, data []byte) bool {
	if name == "" {
		name = eventType(data)
	}
	for _, f := range w.final {
		if f != "" && name == f {
			return true
		}
	}
	return false
}

// foreign: the identity of these answers lives in their first event
// (message_start, response.created), which a retry's stream repeats and
// the gateway drops once the client has one; their deltas carry none.
func (eventWire) foreign(*template, *chunk, int) bool { return false }

func (eventWire) streamHeader(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
}

// frame names the event after the payload's type, as both APIs do.
func (eventWire) frame(dst, p []byte) []byte { return appendNamed(dst, eventType(p), p) }

// appendNamed appends one SSE event named name (none when empty).
func appendNamed(dst []byte, name string, p []byte) []byte {
	if name != "" {
		dst = append(dst, "event: "...)
		dst = append(dst, name...)
		dst = append(dst, '\n')
	}
	return sse.AppendData(dst, p)
}

// appendComment: both APIs' clients skip Server-Sent Events comments, so
// a held stream gets keep-alive comments as the chat API's does.
func (eventWire) appendComment(dst []byte) []byte { return append(dst, keepAliveComment...) }

// appendEnd: the last event ends the stream; there is no marker.
func (eventWire) appendEnd(dst []byte) []byte { return dst }

// eventType reads the "type" member of the payload p, first where both
// APIs put it (the first member), else anywhere at the top level; "" when
// p has none.
func eventType(p []byte) string {
	const pre = `{"type":"`
	if bytes.HasPrefix(p, []byte(pre)) {
		rest := p[len(pre):]
		if i := bytes.IndexByte(rest, '"'); i >= 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return string(rest[:i])
		}
	}
	var t struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(p, &t) != nil {
		return ""
	}
	return t.Type
}

// maxParts bounds the parts (content blocks, output items) of one answer.
const maxParts = 4096

// partState follows the parts of one attempt's answer as the upstream
// streams them, to refuse a stream whose parts do not fit together: a
// part opened twice or out of order, a delta or close for a part never
// opened or already closed, a delta of the wrong kind. It lives in the
// attempt's chunk (chunk.parts), so every attempt starts with none.
type partState struct {
	kinds  []string       // each part's type, by index
	closed []bool         // whether each part was closed
	tool   []int          // each part's tool call ordinal, -1 when not a call
	ids    map[string]int // Responses: item id to index
	tools  int            // the calls opened
	// closing says the payload just read closes a part: it goes out also
	// in a hidden retry, whose opening events the client already has.
	closing bool
}

// open records part i of kind. It must be the next one: parts are
// numbered from 0 without gaps, each opened once.
func (s *partState) open(i int, kind string) error {
	switch {
	case i < 0:
		return fmt.Errorf("part index %d is negative", i)
	case i < len(s.kinds):
		return fmt.Errorf("part %d was opened twice", i)
	case i > len(s.kinds):
		return fmt.Errorf("part %d opened before part %d (an index was skipped)", i, len(s.kinds))
	case i >= maxParts:
		return fmt.Errorf("more than %d parts in one answer", maxParts)
	}
	s.kinds = append(s.kinds, kind)
	s.closed = append(s.closed, false)
	t := -1
	if kind == "tool_use" || kind == "function_call" {
		t = s.tools
		s.tools++
	}
	s.tool = append(s.tool, t)
	return nil
}

// at returns the kind of the open part i.
func (s *partState) at(i int) (string, error) {
	if i < 0 || i >= len(s.kinds) {
		return "", fmt.Errorf("a delta for part %d, which was never opened", i)
	}
	if s.closed[i] {
		return "", fmt.Errorf("a delta for part %d after it was closed", i)
	}
	return s.kinds[i], nil
}

// close closes the open part i and returns its kind.
func (s *partState) close(i int) (string, error) {
	switch {
	case i < 0 || i >= len(s.kinds):
		return "", fmt.Errorf("closing part %d, which was never opened", i)
	case s.closed[i]:
		return "", fmt.Errorf("part %d was closed twice", i)
	}
	s.closed[i] = true
	return s.kinds[i], nil
}

// unclosed returns the first part still open, or -1.
func (s *partState) unclosed() int {
	for i, c := range s.closed {
		if !c {
			return i
		}
	}
	return -1
}

// callDelta makes c carry one piece of the tool call of part i: its id
// and name when it opens, a piece of its arguments text, or, whole, its
// arguments as an object.
func (s *partState) callDelta(c *chunk, i int, id, name, args string, whole bool) {
	ord := s.tool[i]
	d := toolcalls.Delta{Index: &ord, ID: id, Name: name, Whole: whole}
	if id != "" || name != "" {
		d.Type = "function"
	}
	switch {
	case whole:
		d.Arguments = json.RawMessage(args)
	case args != "" || id == "":
		d.Arguments, _ = json.Marshal(args)
	}
	c.addCall(d)
}

// heldWithCall marks a payload that carries no piece of a call but
// belongs with one (its close, its arguments' done event): it is held
// and goes out with the call.
func (c *chunk) heldWithCall() { c.hasTools = true }

// closesPart reports whether the payload just read closes a content
// block or output item (kept in a hidden retry, where the retry's other
// payloads without events are dropped).
func (c *chunk) closesPart() bool { return c.parts.closing }

// setThoughtBuf records the reasoning that AppendString put in the
// chunk's reasoning buffer (c.rbuf).
func (c *chunk) setThoughtBuf() { c.reasoning, c.hasReasoning = c.rbuf, len(c.rbuf) > 0 }

// kindMismatch is the error of a delta that does not belong in its part.
func kindMismatch(delta string, i int, kind string) error {
	return fmt.Errorf("%s for part %d, which is a %s", delta, i, kind)
}

// The text deltas of a stream are most of its events, and llama-server
// spells every one the same way: readDelta reads those without decoding
// the payload (a decoder's cost per event would otherwise be about fifty
// times the chat route's). Any other spelling goes to the decoder.

// stringEnd returns the index after the closing quote of the JSON string
// whose body starts at p[i], or -1 when a strict decoder would refuse it
// (a control character, an unknown escape) or it does not end.
func stringEnd(p []byte, i int) int {
	for i < len(p) {
		switch c := p[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(p) || bytes.IndexByte([]byte(`"\/bfnrtu`), p[i+1]) < 0 {
				return -1
			}
			i += 2
		case c < 0x20:
			return -1
		default:
			i++
		}
	}
	return -1
}

// cutPrefix returns p[i:] without pre, and whether p[i:] began with it.
func cutPrefix(p []byte, i int, pre string) (int, bool) {
	if len(p)-i < len(pre) || string(p[i:i+len(pre)]) != pre {
		return i, false
	}
	return i + len(pre), true
}

// quoted reads the JSON string that starts at p[i] (its opening quote):
// its span, quotes included, and where it ends.
func quoted(p []byte, i int) (chunkscan.Span, bool) {
	if i >= len(p) || p[i] != '"' {
		return chunkscan.Span{}, false
	}
	end := stringEnd(p, i+1)
	if end < 0 {
		return chunkscan.Span{}, false
	}
	return chunkscan.Span{Start: i, End: end}, true
}

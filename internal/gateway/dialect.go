package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/openai"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// routeKind is the API a client called; it fixes the wire format of the
// request, the stream and the final body.
type routeKind int

const (
	routeChat           routeKind = iota // POST /v1/chat/completions (SSE)
	routeCompletions                     // POST /v1/completions (SSE)
	routeOllamaChat                      // POST /api/chat (NDJSON)
	routeOllamaGenerate                  // POST /api/generate (NDJSON)
)

func (k routeKind) String() string {
	switch k {
	case routeChat:
		return "/v1/chat/completions"
	case routeCompletions:
		return "/v1/completions"
	case routeOllamaChat:
		return "/api/chat"
	case routeOllamaGenerate:
		return "/api/generate"
	}
	return "unknown"
}

func (k routeKind) ndjson() bool { return k == routeOllamaChat || k == routeOllamaGenerate }

// upstreamPath returns the upstream path for the route; the Ollama routes
// need an Ollama upstream.
func (k routeKind) upstreamPath(kind upstream.Kind) (string, error) {
	if k.ndjson() && kind != upstream.KindOllama {
		return "", fmt.Errorf("%s is served only in front of an Ollama upstream (this one is %s)", k, kind)
	}
	return k.String(), nil
}

// chunk is what the gateway reads from one streamed payload. Its text
// and identity point into the payload and a buffer the chunk reuses: they
// are valid until the next parse.
type chunk struct {
	text      []byte
	hasText   bool
	toolCalls []openai.ToolCall
	// olToolCalls are Ollama's native tool calls (whole, arguments as an object).
	olToolCalls []json.RawMessage
	// finish is set on the chunk that ends the answer (finish_reason, or
	// Ollama's done:true).
	finish       bool
	finishReason string
	errMsg       string
	created      int64
	// p and f are the payload and what the scanner found in it; the
	// identity strings are read from them only when needed.
	p   []byte
	f   chunkscan.Fields
	buf []byte
}

func (c *chunk) str(sp chunkscan.Span) string { return string(chunkscan.AppendString(nil, c.p, sp)) }

// is reports whether the string at sp reads s, without allocating for a
// string without escapes.
func (c *chunk) is(sp chunkscan.Span, s string) bool {
	if !sp.Present() {
		return s == ""
	}
	if b := c.p[sp.Start+1 : sp.End-1]; bytes.IndexByte(b, '\\') < 0 && utf8.Valid(b) {
		return string(b) == s
	}
	return c.str(sp) == s
}

func (k routeKind) format() chunkscan.Format {
	switch k {
	case routeCompletions:
		return chunkscan.Completions
	case routeOllamaChat, routeOllamaGenerate:
		return chunkscan.Ollama
	}
	return chunkscan.Chat
}

// parse reads one payload of the route's stream into c. It reads the
// payload as encoding/json would into the wire structs (see chunkscan),
// without allocating for a chunk of plain text.
func (k routeKind) parse(p []byte, c *chunk) error {
	*c = chunk{buf: c.buf[:0], p: p}
	if err := chunkscan.Scan(k.format(), p, &c.f); err != nil {
		if k.ndjson() {
			return fmt.Errorf("upstream sent a line that is not JSON: %w", err)
		}
		return fmt.Errorf("upstream sent an event that is not JSON: %w", err)
	}
	f := &c.f
	if k.ndjson() {
		if c.errMsg = c.str(f.Error); c.errMsg != "" {
			return nil
		}
	} else if f.Error.Present() {
		c.errMsg = string(f.Error.Of(p))
		return nil
	}
	c.created = f.Created
	c.buf = chunkscan.AppendString(c.buf, p, f.Text)
	c.text, c.hasText = c.buf, len(c.buf) > 0
	if f.ToolCallCount > 0 {
		var err error
		if k.ndjson() {
			err = json.Unmarshal(f.ToolCalls.Of(p), &c.olToolCalls)
		} else {
			err = json.Unmarshal(f.ToolCalls.Of(p), &c.toolCalls)
		}
		if err != nil {
			return fmt.Errorf("upstream sent tool calls that do not decode: %w", err)
		}
	}
	if k.ndjson() {
		c.finish = f.Done
		if f.FinishReason.Present() {
			c.finishReason = c.str(f.FinishReason)
		}
	} else if f.FinishReason.Present() {
		if c.finishReason = c.str(f.FinishReason); c.finishReason != "" {
			c.finish = true
		}
	}
	return nil
}

// template is the identity of the answer the client sees, taken from the
// upstream's first chunk: synthesized chunks copy it, and the chunks of a
// hidden retry are restamped with it, so that a repaired stream reads as
// one answer with one id.
type template struct {
	id, model, createdAt string
	fingerprint          string
	created              int64
	set                  bool
	// attempt is the attempt the template was learned from.
	attempt int
	// createdVaries is set when that attempt's chunks carried different
	// created times (llama-server stamps each chunk with its own time);
	// else created is one value per answer (OpenAI) and a retry keeps it.
	createdVaries bool
}

func (t *template) learn(c *chunk, attempt int) {
	if !t.set {
		t.id, t.model, t.created, t.createdAt, t.fingerprint, t.set = c.str(c.f.ID), c.str(c.f.Model), c.created, c.str(c.f.CreatedAt), c.str(c.f.Fingerprint), true
		t.attempt = attempt
		return
	}
	if attempt == t.attempt && c.created != t.created {
		t.createdVaries = true
	}
}

// foreign reports whether chunk c, read in attempt, must be restamped
// before a client sees it: it belongs to a later attempt than the one the
// client's answer began with, and its identity differs from that answer's.
func (t *template) foreign(k routeKind, c *chunk, attempt int) bool {
	if !t.set || attempt == t.attempt || k.ndjson() {
		return false // Ollama's native chunks carry no id; created_at is per chunk
	}
	return !c.is(c.f.ID, t.id) || !c.is(c.f.Model, t.model) || !c.is(c.f.Fingerprint, t.fingerprint) || !t.createdVaries && c.created != t.created
}

// restamp returns the chunk p of a retried attempt with the identity of
// the first: id, model, system_fingerprint and, unless the upstream stamps
// every chunk with its own time, created. Its other members are kept.
func (t *template) restamp(p []byte) []byte {
	var m rawBody
	if json.Unmarshal(p, &m) != nil || m == nil {
		return p
	}
	m.set("id", t.id)
	m.set("model", t.model)
	if t.fingerprint != "" {
		m.set("system_fingerprint", t.fingerprint)
	} else {
		delete(m, "system_fingerprint")
	}
	if !t.createdVaries {
		m.set("created", t.created)
	}
	return m.encode()
}

// synth returns a chunk carrying text, for text that must be cut out of
// an upstream chunk (part of it released, or the rest after a retry). It
// is written into dst's storage, with the members in the order
// encoding/json gives a map.
func (k routeKind) synth(dst []byte, t *template, text []byte) []byte {
	return k.appendChunk(dst, t, text, "")
}

// appendChunk appends a chunk with text and, when finish is set, the
// finish reason that ends the answer.
func (k routeKind) appendChunk(dst []byte, t *template, text []byte, finish string) []byte {
	q := func(s string) { dst = chunkscan.AppendQuoted(dst, []byte(s)) }
	switch k {
	case routeChat, routeCompletions:
		dst = append(dst, `{"choices":[{`...)
		if k == routeChat {
			dst = append(dst, `"delta":{`...)
			if finish == "" {
				dst = append(dst, `"content":`...)
				dst = chunkscan.AppendQuoted(dst, text)
			}
			dst = append(dst, `},`...)
		}
		dst = append(dst, `"finish_reason":`...)
		if finish == "" {
			dst = append(dst, "null"...)
		} else {
			q(finish)
		}
		dst = append(dst, `,"index":0`...)
		if k == routeCompletions {
			dst = append(dst, `,"text":`...)
			dst = chunkscan.AppendQuoted(dst, text)
		}
		dst = append(dst, `}],"created":`...)
		dst = strconv.AppendInt(dst, t.created, 10)
		dst = append(dst, `,"id":`...)
		q(t.id)
		dst = append(dst, `,"model":`...)
		q(t.model)
		if k == routeChat {
			dst = append(dst, `,"object":"chat.completion.chunk"`...)
		} else {
			dst = append(dst, `,"object":"text_completion"`...)
		}
		if t.fingerprint != "" && finish == "" {
			dst = append(dst, `,"system_fingerprint":`...)
			q(t.fingerprint)
		}
		return append(dst, '}')
	}
	dst = append(dst, `{"created_at":`...)
	q(t.createdAt)
	if finish == "" {
		dst = append(dst, `,"done":false`...)
	} else {
		dst = append(dst, `,"done":true,"done_reason":`...)
		q(finish)
	}
	if k == routeOllamaChat {
		dst = append(dst, `,"message":{"content":`...)
		dst = chunkscan.AppendQuoted(dst, text)
		dst = append(dst, `,"role":"assistant"}`...)
	}
	dst = append(dst, `,"model":`...)
	q(t.model)
	if k == routeOllamaGenerate {
		dst = append(dst, `,"response":`...)
		dst = chunkscan.AppendQuoted(dst, text)
	}
	return append(dst, '}')
}

// withMeta returns the JSON object p with the "aegis" member added.
func withMeta(p []byte, m *meta) []byte {
	mb, err := json.Marshal(m)
	if err != nil || len(p) < 2 || p[len(p)-1] != '}' {
		return p
	}
	out := make([]byte, 0, len(p)+len(mb)+10)
	out = append(out, p[:len(p)-1]...)
	if len(p) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"aegis":`...)
	out = append(out, mb...)
	return append(out, '}')
}

// toolAcc assembles streamed tool-call deltas into whole calls.
type toolAcc struct {
	calls []openai.ToolCall
}

func (a *toolAcc) add(deltas []openai.ToolCall) {
	for i, d := range deltas {
		idx := i
		if d.Index != nil {
			idx = *d.Index
		}
		for len(a.calls) <= idx {
			n := len(a.calls)
			a.calls = append(a.calls, openai.ToolCall{Index: &n, Type: "function"})
		}
		c := &a.calls[idx]
		if d.ID != "" {
			c.ID = d.ID
		}
		if d.Type != "" {
			c.Type = d.Type
		}
		c.Function.Name += d.Function.Name
		c.Function.Arguments += d.Function.Arguments
	}
}

func (a *toolAcc) validator() []validator.ToolCall {
	out := make([]validator.ToolCall, len(a.calls))
	for i, c := range a.calls {
		out[i] = c.Validator(i)
	}
	return out
}

// olToolCall converts one of Ollama's native tool calls.
func olToolCall(i int, raw json.RawMessage) validator.ToolCall {
	var c struct {
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	}
	json.Unmarshal(raw, &c)
	return validator.ToolCall{Index: i, ID: strconv.Itoa(i), Name: c.Function.Name, Arguments: string(c.Function.Arguments)}
}

package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// dialect is one wire API a client calls: OpenAI chat, OpenAI
// completions, Ollama chat, Ollama generate (dialect_*.go, one file
// each). It owns every difference of the wire, in three parts: how the
// client's request is read and edited for a retry (requestEditor), how
// the upstream's stream is read (streamReader), and how the chunks,
// bodies and errors the gateway writes itself are spelled (clientWriter).
// Its edits are pure functions of their arguments.
type dialect interface {
	// String is the route's path, as in events and error messages.
	String() string
	requestEditor
	streamReader
	clientWriter
}

// requestEditor reads the client's request and edits it for the upstream.
type requestEditor interface {
	// decode reads the fields the gateway interprets from the client's
	// request raw (body is the same, as members).
	decode(raw []byte, body rawBody) (request, error)
	// generates reports whether the request asks for generated text
	// (Ollama's chat without messages loads or unloads a model).
	generates(body rawBody) bool
	// choices is how many choices the request asks for.
	choices(body rawBody) (int, error)
	// streamBody makes b ask for a stream, with usage in it when the
	// client does not stream (clientStreams).
	streamBody(b rawBody, clientStreams bool)
	// continueWith puts a retry's correction note and the text already
	// released (prefix, continued by the retry) into b.
	continueWith(b rawBody, note, prefix string)
	// constrainJSON asks an upstream of kind for JSON (schema, or any
	// JSON object when schema is nil).
	constrainJSON(b rawBody, kind upstream.Kind, schema json.RawMessage)
	// antiRepeat sets the sampling parameters that break loops.
	antiRepeat(b rawBody, kind upstream.Kind)
	// shrinkBudget lowers b's token limit by carried, never below one.
	shrinkBudget(b rawBody, carried int)
}

// streamReader reads an upstream's streamed answer.
type streamReader interface {
	// upstreamPath is the path to ask an upstream of kind.
	upstreamPath(kind upstream.Kind) (string, error)
	// newStream reads an upstream's streamed answer.
	newStream(body io.ReadCloser) *upstream.Stream
	// parse decodes one payload of the stream into the events of c
	// (event.go), without allocating for a chunk of plain text or
	// reasoning. A payload it does not know carries no event and passes
	// through; one that is not what the wire promises is an error naming
	// what is wrong.
	parse(p []byte, c *chunk) error
	// foreign reports whether c, read in attempt, must be restamped with
	// the identity of the answer the client already has.
	foreign(t *template, c *chunk, attempt int) bool
}

// clientWriter spells what the gateway writes to the client itself.
// A writer that can spell a piece of reasoning implements
// reasoningWriter too (event.go).
type clientWriter interface {
	// appendChunk appends a chunk with text and, when finish is set, the
	// finish reason that ends the answer.
	appendChunk(dst []byte, t *template, text []byte, finish string) []byte
	// streamHeader sets the headers of a streamed answer.
	streamHeader(h http.Header)
	// frame appends payload p framed for the client's stream.
	frame(dst, p []byte) []byte
	// appendEnd appends the stream's end marker, if the API has one.
	appendEnd(dst []byte) []byte
	// errorBody is the JSON body of an error (m, when set, is the
	// verdict); coded says the error is a halt with Aegis's error code.
	errorBody(e apiError, m *meta, coded bool) any
	// collect keeps the members of one streamed payload m that a
	// non-streamed answer carries over (rebuild.go).
	collect(a *fieldAcc, m rawBody)
	// body assembles the non-streamed answer from the closing chunks'
	// top-level members (top) and the answers: one, or, where the API has
	// n choices, one per choice (the first gives the answer's identity).
	body(top rawBody, answers ...*output) rawBody
}

// request is what the gateway interprets of a client's request.
type request struct {
	model  string
	vreq   *validator.Request
	stream bool

	body rawBody // the request as the client sent it, member by member
	// raw is the request's bytes as the client sent them while they say
	// exactly what body says (splitRequest), nil once body was changed.
	raw     []byte
	logText bool // the policy allows logging text (log_text)
}

// output is what an attempt answered, as a non-streamed body carries it.
type output struct {
	text string
	// reasoning is the reasoning the client gets with the answer ("" when
	// the policy hides it or there was none).
	reasoning string
	finish    string // "" means stop
	tpl       *template
	tools     toolAcc
	acc       *fieldAcc
}

func (a *output) finishReason() string {
	if a.finish == "" {
		return "stop"
	}
	return a.finish
}

// chunk is what the gateway reads from one streamed payload. Its text
// and identity point into the payload and a buffer the chunk reuses: they
// are valid until the next parse.
type chunk struct {
	payloadFields
	buf  []byte
	rbuf []byte // reasoning's buffer
	// memo reads the stream's chunks that differ from the last only in
	// their text without walking their whole structure.
	memo chunkscan.Memo
	// parts follows the content blocks or output items of the dialects
	// whose answers are made of them (eventwire.go).
	parts partState
}

// reset readies c for the payload p: what the last payload held is
// cleared, the buffer and the memo stay.
func (c *chunk) reset(p []byte) {
	calls := c.calls[:0]
	c.payloadFields = payloadFields{p: p, calls: calls}
	c.buf, c.rbuf = c.buf[:0], c.rbuf[:0]
}

// payloadFields are the events of one payload (event.go lists them).
type payloadFields struct {
	text    []byte
	hasText bool
	// reasoning is the model's reasoning (hasReasoning): held, checked and
	// released like text, spelled as reasoning.
	reasoning    []byte
	hasReasoning bool
	// hasTools says the chunk carries pieces of tool calls (calls): OpenAI's
	// deltas, the legacy function_call, or Ollama's whole native calls.
	hasTools bool
	calls    []toolcalls.Delta
	// finish is set on the chunk that ends the answer (finish_reason, or
	// Ollama's done:true).
	finish       bool
	finishReason string
	// usage: the chunk carries token counts or timings; progress: the
	// upstream reports work on the prompt before any output.
	usage, progress bool
	errMsg          string
	created         int64
	// p and f are the payload and what the scanner found in it; the
	// identity strings are read from them only when needed.
	p []byte
	f chunkscan.Fields
}

// readText reads the chunk's time and text, the members both wire
// families spell alike once scanned.
func (c *chunk) readText() {
	c.created = c.f.Created
	c.buf = chunkscan.AppendString(c.buf, c.p, c.f.Text)
	c.text, c.hasText = c.buf, len(c.buf) > 0
	if c.f.Reasoning.Present() {
		c.rbuf = chunkscan.AppendString(c.rbuf, c.p, c.f.Reasoning)
		c.reasoning, c.hasReasoning = c.rbuf, len(c.rbuf) > 0
	}
	c.usage, c.progress = c.f.Usage, c.f.Progress
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
func (t *template) foreign(c *chunk, attempt int) bool {
	if !t.set || attempt == t.attempt {
		return false
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

// withMeta returns the JSON object p with the "aegis" member added.
func withMeta(p []byte, m *meta) []byte {
	if len(p) < 2 || p[len(p)-1] != '}' {
		return p
	}
	out := make([]byte, 0, len(p)+256)
	out = append(out, p[:len(p)-1]...)
	if len(p) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"aegis":`...)
	out, ok := appendMeta(out, m)
	if !ok {
		return p
	}
	return append(out, '}')
}

// toolAcc holds one attempt's tool calls as toolcalls.Accumulator
// assembles them from the chunks' tool-call events: the one place calls
// are put together, for the checks and for the answer's body alike.
type toolAcc struct {
	// acc assembles the pieces, with what is wrong with them (index
	// gaps, arguments for a call never opened, arguments past the size
	// limit).
	acc toolcalls.Accumulator
}

// add assembles the tool-call pieces of c.
func (a *toolAcc) add(c *chunk) {
	for i, d := range c.calls {
		a.acc.Add(d, i)
	}
}

// hasCalls reports whether a holds a tool call.
func (a *toolAcc) hasCalls() bool { return a.acc.Len() > 0 }

// problems returns malformed_tool_call findings for the deltas that did
// not fit together.
func (a *toolAcc) problems() []validator.Finding {
	a.acc.Finish()
	return a.acc.Findings()
}

// calls returns the assembled calls as the checks judge them.
func (a *toolAcc) calls() []validator.ToolCall { return a.acc.Calls() }

package gateway

import (
	"encoding/json"
	"fmt"
	"strconv"

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

// chunk is what the gateway reads from one streamed payload.
type chunk struct {
	text      string
	hasText   bool
	toolCalls []openai.ToolCall
	// olToolCalls are Ollama's native tool calls (whole, arguments as an object).
	olToolCalls []json.RawMessage
	// finish is set on the chunk that ends the answer (finish_reason, or
	// Ollama's done:true).
	finish       bool
	finishReason string
	errMsg       string
	id, model    string
	fingerprint  string
	created      int64
	createdAt    string
}

type oaChunk struct {
	ID          string `json:"id"`
	Created     int64  `json:"created"`
	Model       string `json:"model"`
	Fingerprint string `json:"system_fingerprint"`
	Choices     []struct {
		Delta struct {
			Content   *string           `json:"content"`
			ToolCalls []openai.ToolCall `json:"tool_calls"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Error json.RawMessage `json:"error"`
}

type olChunk struct {
	Model     string `json:"model"`
	CreatedAt string `json:"created_at"`
	Message   *struct {
		Content   string            `json:"content"`
		ToolCalls []json.RawMessage `json:"tool_calls"`
	} `json:"message"`
	Response   *string `json:"response"`
	Done       bool    `json:"done"`
	DoneReason string  `json:"done_reason"`
	Error      string  `json:"error"`
}

// parse reads one payload of the route's stream into c.
func (k routeKind) parse(p []byte, c *chunk) error {
	*c = chunk{}
	if k.ndjson() {
		var o olChunk
		if err := json.Unmarshal(p, &o); err != nil {
			return fmt.Errorf("upstream sent a line that is not JSON: %w", err)
		}
		c.model, c.createdAt = o.Model, o.CreatedAt
		if o.Error != "" {
			c.errMsg = o.Error
			return nil
		}
		if o.Message != nil {
			c.text, c.hasText = o.Message.Content, o.Message.Content != ""
			c.olToolCalls = o.Message.ToolCalls
		} else if o.Response != nil {
			c.text, c.hasText = *o.Response, *o.Response != ""
		}
		c.finish, c.finishReason = o.Done, o.DoneReason
		return nil
	}
	var o oaChunk
	if err := json.Unmarshal(p, &o); err != nil {
		return fmt.Errorf("upstream sent an event that is not JSON: %w", err)
	}
	if len(o.Error) > 0 && string(o.Error) != "null" {
		c.errMsg = string(o.Error)
		return nil
	}
	c.id, c.model, c.created, c.fingerprint = o.ID, o.Model, o.Created, o.Fingerprint
	if len(o.Choices) > 0 {
		ch := &o.Choices[0]
		if k == routeCompletions {
			if ch.Text != nil {
				c.text, c.hasText = *ch.Text, *ch.Text != ""
			}
		} else if ch.Delta.Content != nil {
			c.text, c.hasText = *ch.Delta.Content, *ch.Delta.Content != ""
		}
		c.toolCalls = ch.Delta.ToolCalls
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			c.finish, c.finishReason = true, *ch.FinishReason
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
		t.id, t.model, t.created, t.createdAt, t.fingerprint, t.set = c.id, c.model, c.created, c.createdAt, c.fingerprint, true
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
	return c.id != t.id || c.model != t.model || c.fingerprint != t.fingerprint || !t.createdVaries && c.created != t.created
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
// an upstream chunk (part of it released, or the rest after a retry).
func (k routeKind) synth(t *template, text string) []byte {
	var v any
	switch k {
	case routeChat:
		m := map[string]any{"id": t.id, "object": "chat.completion.chunk", "created": t.created, "model": t.model,
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": text}, "finish_reason": nil}}}
		if t.fingerprint != "" {
			m["system_fingerprint"] = t.fingerprint
		}
		v = m
	case routeCompletions:
		m := map[string]any{"id": t.id, "object": "text_completion", "created": t.created, "model": t.model,
			"choices": []any{map[string]any{"index": 0, "text": text, "finish_reason": nil}}}
		if t.fingerprint != "" {
			m["system_fingerprint"] = t.fingerprint
		}
		v = m
	case routeOllamaChat:
		v = map[string]any{"model": t.model, "created_at": t.createdAt,
			"message": map[string]any{"role": "assistant", "content": text}, "done": false}
	default:
		v = map[string]any{"model": t.model, "created_at": t.createdAt, "response": text, "done": false}
	}
	b, _ := json.Marshal(v)
	return b
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

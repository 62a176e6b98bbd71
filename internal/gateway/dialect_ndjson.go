package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/sse"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// ndjsonWire is what the two Ollama dialects share: newline-delimited
// JSON, an Ollama upstream, streaming unless told not to, and the
// sampling and budget members under "options".
type ndjsonWire struct {
	path string
}

func (w ndjsonWire) String() string { return w.path }

func (w ndjsonWire) upstreamPath(kind upstream.Kind) (string, error) {
	if kind != upstream.KindOllama {
		return "", fmt.Errorf("%s is served only in front of an Ollama upstream (this one is %s)", w.path, kind)
	}
	return w.path, nil
}

// ollamaRequest reads what Ollama's requests say beside the messages or
// prompt: the model is required, the answer streams unless "stream" is
// false, options.num_predict is the token limit and "format" asks for
// JSON.
func ollamaRequest(r request, body rawBody) (request, error) {
	if r.model == "" {
		return r, fmt.Errorf("model is required")
	}
	r.stream = true
	if s, ok := body["stream"]; ok && string(s) == "false" {
		r.stream = false
	}
	opts := body.object("options")
	if n, ok := opts["num_predict"]; ok {
		json.Unmarshal(n, &r.vreq.MaxTokens)
	}
	if f, ok := body["format"]; ok && len(f) > 0 && string(f) != "null" && string(f) != `""` {
		if string(f) == `"json"` {
			r.vreq.ResponseFormat = &validator.ResponseFormat{Type: "json_object"}
		} else if f[0] == '{' {
			r.vreq.ResponseFormat = &validator.ResponseFormat{Type: "json_schema", Schema: f}
		}
	}
	return r, nil
}

// choices: Ollama gives one answer per request and has no "n".
func (ndjsonWire) choices(rawBody) (int, error) { return 1, nil }

func (ndjsonWire) streamBody(b rawBody, clientStreams bool) { b.set("stream", true) }

func (ndjsonWire) constrainJSON(b rawBody, kind upstream.Kind, schema json.RawMessage) {
	if schema != nil {
		b["format"] = schema
	} else {
		b.set("format", "json")
	}
}

func (ndjsonWire) antiRepeat(b rawBody, kind upstream.Kind) {
	o := b.object("options")
	o.set("repeat_penalty", 1.3)
	o.set("repeat_last_n", 256)
	b.set("options", o)
}

func (ndjsonWire) shrinkBudget(b rawBody, carried int) {
	o := b.object("options")
	if n, ok := budgetLeft(o["num_predict"], carried); ok {
		o.set("num_predict", n)
		b.set("options", o)
	}
}

func (ndjsonWire) newStream(body io.ReadCloser) *upstream.Stream {
	return upstream.NewNDJSONStream(body)
}

func (ndjsonWire) parse(p []byte, c *chunk) error {
	c.reset(p)
	if err := c.memo.Scan(chunkscan.Ollama, p, &c.f); err != nil {
		return fmt.Errorf("upstream sent a line that is not JSON: %w", err)
	}
	f := &c.f
	if c.errMsg = c.str(f.Error); c.errMsg != "" {
		return nil
	}
	c.readText()
	if f.ToolCallCount > 0 {
		var err error
		if c.calls, err = toolcalls.AppendOllama(c.calls, f.ToolCalls.Of(p)); err != nil {
			return fmt.Errorf("upstream sent tool calls that do not decode: %w", err)
		}
		c.hasTools = len(c.calls) > 0
	}
	c.finish = f.Done
	if f.FinishReason.Present() {
		c.finishReason = c.str(f.FinishReason)
	}
	return nil
}

// foreign: Ollama's native chunks carry no id, and created_at is per
// chunk, so a retry's chunks are never restamped.
func (ndjsonWire) foreign(*template, *chunk, int) bool { return false }

func (ndjsonWire) streamHeader(h http.Header) { h.Set("Content-Type", "application/x-ndjson") }

func (ndjsonWire) frame(dst, p []byte) []byte { return sse.AppendLine(dst, p) }

func (ndjsonWire) appendEnd(dst []byte) []byte { return dst }

// ollamaError is Ollama's error body: a string, here with the verdict
// beside it.
type ollamaError struct {
	Aegis *meta  `json:"aegis,omitempty"`
	Error string `json:"error"`
}

func (ndjsonWire) errorBody(e apiError, m *meta, coded bool) any {
	if coded {
		return ollamaError{Aegis: m, Error: e.Code + ": " + e.Message}
	}
	return ollamaError{Aegis: m, Error: e.Message}
}

// appendOllamaHead opens a native chunk: its time and whether it ends
// the answer.
func appendOllamaHead(dst []byte, t *template, finish string) []byte {
	dst = append(dst, `{"created_at":`...)
	dst = chunkscan.AppendQuoted(dst, []byte(t.createdAt))
	if finish == "" {
		return append(dst, `,"done":false`...)
	}
	dst = append(dst, `,"done":true,"done_reason":`...)
	return chunkscan.AppendQuoted(dst, []byte(finish))
}

// setOllamaDone gives an assembled body its model and done.
func setOllamaDone(top rawBody, t *template) {
	top.set("model", t.model)
	top.set("done", true)
}

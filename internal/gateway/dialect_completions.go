package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/openai"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// completionsDialect is OpenAI's legacy completions: POST
// /v1/completions, a prompt in, Server-Sent Events of text_completion
// out.
type completionsDialect struct{ sseWire }

// The dialect's one value (an interface value made once).
var dialectCompletions dialect = completionsDialect{sseWire{path: "/v1/completions", format: chunkscan.Completions}}

func (completionsDialect) decode(raw []byte, body rawBody) (request, error) {
	return decodeCompletion(raw)
}

// decodeCompletion reads a prompt request (OpenAI's completions or
// Ollama's generate): the prompt is a string or an array of strings, an
// optional system prompt goes first.
func decodeCompletion(raw []byte) (request, error) {
	var cr struct {
		Model     string          `json:"model"`
		Prompt    json.RawMessage `json:"prompt"`
		System    string          `json:"system"`
		Stream    bool            `json:"stream"`
		MaxTokens *int            `json:"max_tokens"`
		// A response_format on a prompt request is checked even where the
		// upstream ignores it (llama-server's /v1/completions does).
		ResponseFormat *openai.ResponseFormat `json:"response_format"`
	}
	if err := json.Unmarshal(raw, &cr); err != nil {
		return request{}, fmt.Errorf("invalid completion request: %w", openai.DecodeError(err))
	}
	var prompt string
	if len(cr.Prompt) > 0 && json.Unmarshal(cr.Prompt, &prompt) != nil {
		var parts []string
		if json.Unmarshal(cr.Prompt, &parts) != nil {
			return request{}, fmt.Errorf("prompt must be a string or an array of strings")
		}
		for _, p := range parts {
			prompt += p
		}
	}
	r := request{model: cr.Model, vreq: &validator.Request{}, stream: cr.Stream}
	if cr.System != "" {
		r.vreq.Messages = append(r.vreq.Messages, validator.Message{Role: "system", Content: cr.System})
	}
	r.vreq.Messages = append(r.vreq.Messages, validator.Message{Role: "user", Content: prompt})
	if cr.MaxTokens != nil {
		r.vreq.MaxTokens = *cr.MaxTokens
	}
	if rf := cr.ResponseFormat; rf != nil && rf.Type != "" && rf.Type != "text" {
		r.vreq.ResponseFormat = rf.Validator()
	}
	return r, nil
}

// continueWith: a prompt has no place for a note; the released text ends
// the prompt.
func (completionsDialect) continueWith(b rawBody, note, prefix string) {
	var p string
	json.Unmarshal(b["prompt"], &p)
	b.set("prompt", p+prefix)
}

// constrainJSON: only llama-server constrains a completion (json_schema).
func (completionsDialect) constrainJSON(b rawBody, kind upstream.Kind, schema json.RawMessage) {
	if kind != upstream.KindLlamaServer {
		return
	}
	if schema != nil {
		b["json_schema"] = schema
	} else {
		b.set("json_schema", map[string]any{"type": "object"})
	}
}

func (completionsDialect) appendChunk(dst []byte, t *template, text []byte, finish string) []byte {
	dst = append(dst, `{"choices":[{`...)
	dst = appendFinishReason(dst, finish)
	dst = append(dst, `,"text":`...)
	dst = chunkscan.AppendQuoted(dst, text)
	return appendIdentity(dst, t, "text_completion", finish)
}

func (completionsDialect) body(top rawBody, answers ...*output) rawBody {
	setIdentity(top, answers[0].tpl, "text_completion")
	choices := make([]any, len(answers))
	for i, ans := range answers {
		choices[i] = ans.acc.withChoice(map[string]any{"index": i, "text": ans.text, "finish_reason": ans.finishReason()})
	}
	top.set("choices", choices)
	answers[0].acc.applyTop(top)
	return top
}

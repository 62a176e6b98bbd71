package gateway

import (
	"encoding/json"
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/openai"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// chatDialect is OpenAI's chat completions: POST /v1/chat/completions,
// messages in, Server-Sent Events of chat.completion.chunk out.
type chatDialect struct{ sseWire }

// The dialect's one value (an interface value made once).
var dialectChat dialect = chatDialect{sseWire{path: "/v1/chat/completions", format: chunkscan.Chat}}

func (chatDialect) decode(raw []byte, body rawBody) (request, error) { return decodeChat(raw) }

// decodeChat reads a chat request (OpenAI's or Ollama's: both carry
// messages).
func decodeChat(raw []byte) (request, error) {
	var cr openai.ChatRequest
	if err := json.Unmarshal(raw, &cr); err != nil {
		return request{}, fmt.Errorf("invalid chat request: %w", openai.DecodeError(err))
	}
	if len(cr.Messages) == 0 {
		return request{}, fmt.Errorf("messages must not be empty")
	}
	return request{model: cr.Model, vreq: cr.ValidatorRequest(), stream: cr.Stream}, nil
}

func (chatDialect) continueWith(b rawBody, note, prefix string) { continueMessages(b, note, prefix) }

// continueMessages puts the note first as a system message and the
// released text last as an assistant prefill.
func continueMessages(b rawBody, note, prefix string) {
	var msgs []json.RawMessage
	json.Unmarshal(b["messages"], &msgs)
	sys, _ := json.Marshal(map[string]string{"role": "system", "content": note})
	msgs = append([]json.RawMessage{sys}, msgs...)
	if prefix != "" {
		pre, _ := json.Marshal(map[string]string{"role": "assistant", "content": prefix})
		msgs = append(msgs, pre)
	}
	b.set("messages", msgs)
}

// constrainJSON: response_format json_schema, or json_object without a
// schema; llama-server and OpenAI-compatible servers read both.
func (chatDialect) constrainJSON(b rawBody, kind upstream.Kind, schema json.RawMessage) {
	if schema != nil {
		b.set("response_format", map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": "response", "schema": schema}})
	} else {
		b.set("response_format", map[string]any{"type": "json_object"})
	}
}

func (chatDialect) appendChunk(dst []byte, t *template, text []byte, finish string) []byte {
	dst = append(dst, `{"choices":[{"delta":{`...)
	if finish == "" {
		dst = append(dst, `"content":`...)
		dst = chunkscan.AppendQuoted(dst, text)
	}
	dst = append(dst, `},`...)
	dst = appendFinishReason(dst, finish)
	return appendIdentity(dst, t, "chat.completion.chunk", finish)
}

// appendReasoning spells a piece of reasoning as llama-server does.
func (chatDialect) appendReasoning(dst []byte, t *template, text []byte) []byte {
	dst = append(dst, `{"choices":[{"delta":{"reasoning_content":`...)
	dst = chunkscan.AppendQuoted(dst, text)
	dst = append(dst, `},`...)
	dst = appendFinishReason(dst, "")
	return appendIdentity(dst, t, "chat.completion.chunk", "")
}

func (chatDialect) body(top rawBody, answers ...*output) rawBody {
	setIdentity(top, answers[0].tpl, "chat.completion")
	choices := make([]any, len(answers))
	for i, ans := range answers {
		msg := map[string]any{"role": "assistant", "content": ans.text}
		if ans.reasoning != "" {
			msg[ans.acc.reasoningKey()] = ans.reasoning
		}
		if ans.tools.hasCalls() {
			msg["tool_calls"] = wholeToolCalls(ans.tools.calls())
			if ans.text == "" {
				msg["content"] = nil
			}
		}
		choices[i] = ans.acc.withChoice(map[string]any{"index": i, "message": ans.acc.withMessage(msg), "finish_reason": ans.finishReason()})
	}
	top.set("choices", choices)
	answers[0].acc.applyTop(top)
	return top
}

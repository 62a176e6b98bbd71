package gateway

import (
	"encoding/json"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
)

// ollamaChatDialect is Ollama's native chat: POST /api/chat, messages
// in, newline-delimited JSON with a message per line out.
type ollamaChatDialect struct{ ndjsonWire }

// The dialect's one value (an interface value made once).
var dialectOllamaChat dialect = ollamaChatDialect{ndjsonWire{path: "/api/chat"}}

func (ollamaChatDialect) decode(raw []byte, body rawBody) (request, error) {
	r, err := decodeChat(raw)
	if err != nil {
		return r, err
	}
	return ollamaRequest(r, body)
}

// generates: a chat without messages is Ollama's idiom to load a model
// (or, with keep_alive 0, unload it).
func (ollamaChatDialect) generates(body rawBody) bool {
	m, ok := body["messages"]
	if !ok || string(m) == "null" || string(m) == "[]" {
		return false
	}
	var msgs []json.RawMessage
	return json.Unmarshal(m, &msgs) != nil || len(msgs) > 0
}

func (ollamaChatDialect) continueWith(b rawBody, note, prefix string) {
	continueMessages(b, note, prefix)
}

func (ollamaChatDialect) appendChunk(dst []byte, t *template, text []byte, finish string) []byte {
	dst = appendOllamaHead(dst, t, finish)
	dst = append(dst, `,"message":{"content":`...)
	dst = chunkscan.AppendQuoted(dst, text)
	dst = append(dst, `,"role":"assistant"},"model":`...)
	dst = chunkscan.AppendQuoted(dst, []byte(t.model))
	return append(dst, '}')
}

// appendReasoning spells a piece of reasoning as Ollama's thinking.
func (ollamaChatDialect) appendReasoning(dst []byte, t *template, text []byte) []byte {
	dst = appendOllamaHead(dst, t, "")
	dst = append(dst, `,"message":{"content":"","role":"assistant","thinking":`...)
	dst = chunkscan.AppendQuoted(dst, text)
	dst = append(dst, `},"model":`...)
	dst = chunkscan.AppendQuoted(dst, []byte(t.model))
	return append(dst, '}')
}

func (ollamaChatDialect) collect(a *fieldAcc, m rawBody) {
	a.addTop(m, "")
	a.addMsg(m.object("message"))
}

func (ollamaChatDialect) body(top rawBody, answers ...*output) rawBody {
	ans := answers[0] // Ollama gives one answer per request
	msg := map[string]any{"role": "assistant", "content": ans.text}
	if ans.reasoning != "" {
		msg["thinking"] = ans.reasoning
	}
	if ans.tools.hasCalls() {
		msg["tool_calls"] = ollamaToolCalls(ans.tools.calls())
	}
	top.set("message", msg)
	setOllamaDone(top, ans.tpl)
	ans.acc.applyTop(top)
	ans.acc.applyMessage(top)
	return top
}

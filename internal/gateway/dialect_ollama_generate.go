package gateway

import (
	"encoding/json"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
)

// ollamaGenerateDialect is Ollama's native generate: POST /api/generate,
// a prompt in, newline-delimited JSON with a response per line out.
type ollamaGenerateDialect struct{ ndjsonWire }

// The dialect's one value (an interface value made once).
var dialectOllamaGenerate dialect = ollamaGenerateDialect{ndjsonWire{path: "/api/generate"}}

func (ollamaGenerateDialect) decode(raw []byte, body rawBody) (request, error) {
	r, err := decodeCompletion(raw)
	if err != nil {
		return r, err
	}
	return ollamaRequest(r, body)
}

func (ollamaGenerateDialect) generates(rawBody) bool { return true }

// continueWith: the note joins the system prompt, the released text ends
// the prompt.
func (ollamaGenerateDialect) continueWith(b rawBody, note, prefix string) {
	var p, s string
	json.Unmarshal(b["prompt"], &p)
	json.Unmarshal(b["system"], &s)
	b.set("prompt", p+prefix)
	b.set("system", strings.TrimSpace(note+"\n"+s))
}

func (ollamaGenerateDialect) appendChunk(dst []byte, t *template, text []byte, finish string) []byte {
	dst = appendOllamaHead(dst, t, finish)
	dst = append(dst, `,"model":`...)
	dst = chunkscan.AppendQuoted(dst, []byte(t.model))
	dst = append(dst, `,"response":`...)
	dst = chunkscan.AppendQuoted(dst, text)
	return append(dst, '}')
}

// appendReasoning spells a piece of reasoning as generate's thinking.
func (ollamaGenerateDialect) appendReasoning(dst []byte, t *template, text []byte) []byte {
	dst = appendOllamaHead(dst, t, "")
	dst = append(dst, `,"model":`...)
	dst = chunkscan.AppendQuoted(dst, []byte(t.model))
	dst = append(dst, `,"response":"","thinking":`...)
	dst = chunkscan.AppendQuoted(dst, text)
	return append(dst, '}')
}

// collect: generate streams its reasoning as top-level "thinking", one
// piece per line.
func (ollamaGenerateDialect) collect(a *fieldAcc, m rawBody) {
	a.addTop(m, "")
	a.addMsg(m.object("message"))
}

func (ollamaGenerateDialect) body(top rawBody, answers ...*output) rawBody {
	ans := answers[0] // Ollama gives one answer per request
	top.set("response", ans.text)
	if ans.reasoning != "" {
		top.set("thinking", ans.reasoning)
	}
	setOllamaDone(top, ans.tpl)
	ans.acc.applyTop(top)
	return top
}

package gateway

import (
	"encoding/json"
	"strings"
)

// The request edits of a retry that differ by API, as pure functions of
// the route.

// continueWith edits a retry's request body b: the correction note goes
// in as a system message (chat) or the system prompt (Ollama generate),
// and the text already released continues as an assistant prefill
// (chat) or the end of the prompt (completions, generate).
func (k routeKind) continueWith(b rawBody, note, prefix string) {
	switch k {
	case routeChat, routeOllamaChat:
		var msgs []json.RawMessage
		json.Unmarshal(b["messages"], &msgs)
		sys, _ := json.Marshal(map[string]string{"role": "system", "content": note})
		msgs = append([]json.RawMessage{sys}, msgs...)
		if prefix != "" {
			pre, _ := json.Marshal(map[string]string{"role": "assistant", "content": prefix})
			msgs = append(msgs, pre)
		}
		b.set("messages", msgs)
	case routeCompletions:
		var p string
		json.Unmarshal(b["prompt"], &p)
		b.set("prompt", p+prefix)
	case routeOllamaGenerate:
		var p, s string
		json.Unmarshal(b["prompt"], &p)
		json.Unmarshal(b["system"], &s)
		b.set("prompt", p+prefix)
		b.set("system", strings.TrimSpace(note+"\n"+s))
	}
}

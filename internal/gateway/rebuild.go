package gateway

import (
	"encoding/json"

	"github.com/aegis-sentinel/aegis/internal/openai"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// fieldAcc keeps, for a non-streaming request, the members of the
// upstream's chunks that the gateway does not interpret itself, so the
// body assembled from the stream carries every field the upstream sent:
// logprobs, reasoning_content, Ollama's thinking, and whatever a server
// adds later. Strings are concatenated and arrays appended across chunks
// (the way a delta stream spells them), objects are merged member by
// member, and other values keep the last one seen.
type fieldAcc struct {
	attempt int
	// rsnKey is the member the upstream spelled reasoning with in a
	// delta ("reasoning_content" or "reasoning"); the body spells the
	// checked reasoning with it.
	rsnKey string
	top    rawBody // top-level members, last value wins
	choice rawBody // members of choices[0] (OpenAI) beside the delta
	msg    rawBody // members of the delta (OpenAI) or message (Ollama)
}

// Members the assembly writes itself; everything else is carried over.
var (
	ownTop = map[string]bool{"id": true, "object": true, "created": true, "model": true, "system_fingerprint": true, "choices": true, "message": true, "response": true, "done": true, "error": true,
		"obfuscation": true, // OpenAI's padding of stream chunks
		"thinking":    true} // Ollama generate's reasoning: the checked one is written
	ownChoice = map[string]bool{"index": true, "delta": true, "text": true, "finish_reason": true, "message": true}
	// The reasoning members are the gateway's: the body carries the
	// reasoning the checks read, or none when the policy hides it.
	ownMsg = map[string]bool{"role": true, "content": true, "tool_calls": true, "reasoning_content": true, "reasoning": true, "thinking": true}
)

// collector keeps the members of one payload its wire API spells (a
// dialect's collect).
type collector interface {
	collect(a *fieldAcc, m rawBody)
}

// add reads one upstream payload of attempt. A new attempt starts over:
// the answer the client gets is the last attempt's.
func (a *fieldAcc) add(attempt int, d collector, p []byte) {
	if attempt != a.attempt {
		*a = fieldAcc{attempt: attempt}
	}
	var m rawBody
	if json.Unmarshal(p, &m) != nil || m == nil {
		return
	}
	d.collect(a, m)
}

// addTop keeps m's top-level members; the one named concat is
// concatenated across chunks, the others keep their last value.
func (a *fieldAcc) addTop(m rawBody, concat string) {
	for k, v := range m {
		if ownTop[k] {
			continue
		}
		if concat != "" && k == concat {
			a.top = mergeMember(a.top, k, v)
			continue
		}
		if a.top == nil {
			a.top = rawBody{}
		}
		a.top[k] = v
	}
}

// addChoice keeps the members of m's choices[0] beside its delta, and
// returns the delta.
func (a *fieldAcc) addChoice(m rawBody) (rawBody, bool) {
	var choices []rawBody
	json.Unmarshal(m["choices"], &choices)
	if len(choices) == 0 || choices[0] == nil {
		return nil, false
	}
	for k, v := range choices[0] {
		if !ownChoice[k] {
			a.choice = mergeMember(a.choice, k, v)
		}
	}
	return choices[0].object("delta"), true
}

// addMsg keeps the members of a delta or message.
func (a *fieldAcc) addMsg(msg rawBody) {
	if _, ok := msg["reasoning"]; ok && a.rsnKey == "" {
		a.rsnKey = "reasoning"
	}
	for k, v := range msg {
		if !ownMsg[k] {
			a.msg = mergeMember(a.msg, k, v)
		}
	}
}

// mergeMember merges v into b[k] and returns b.
func mergeMember(b rawBody, k string, v json.RawMessage) rawBody {
	if b == nil {
		b = rawBody{}
	}
	b[k] = mergeJSON(b[k], v)
	return b
}

// mergeJSON combines an earlier value with a later one.
func mergeJSON(old, v json.RawMessage) json.RawMessage {
	if len(old) == 0 || string(old) == "null" {
		return v
	}
	if string(v) == "null" {
		return old
	}
	switch {
	case old[0] == '"' && v[0] == '"':
		var a, b string
		if json.Unmarshal(old, &a) == nil && json.Unmarshal(v, &b) == nil {
			out, _ := json.Marshal(a + b)
			return out
		}
	case old[0] == '[' && v[0] == '[':
		var a, b []json.RawMessage
		if json.Unmarshal(old, &a) == nil && json.Unmarshal(v, &b) == nil {
			out, _ := json.Marshal(append(a, b...))
			return out
		}
	case old[0] == '{' && v[0] == '{':
		var a, b rawBody
		if json.Unmarshal(old, &a) == nil && json.Unmarshal(v, &b) == nil {
			for k, bv := range b {
				a[k] = mergeJSON(a[k], bv)
			}
			return a.encode()
		}
	}
	return v
}

// applyTop adds the kept top-level members the body lacks.
func (a *fieldAcc) applyTop(body rawBody) {
	for k, v := range a.top {
		if _, ok := body[k]; !ok {
			body[k] = v
		}
	}
}

// withChoice adds the kept members of choices[0] to the choice c.
func (a *fieldAcc) withChoice(c map[string]any) map[string]any {
	for k, v := range a.choice {
		c[k] = v
	}
	return c
}

// withMessage adds the kept members of the delta to the message msg.
func (a *fieldAcc) withMessage(msg map[string]any) map[string]any {
	for k, v := range a.msg {
		msg[k] = v
	}
	return msg
}

// applyMessage adds the message's kept members to the body's message.
func (a *fieldAcc) applyMessage(body rawBody) {
	if len(a.msg) == 0 {
		return
	}
	msg := body.object("message")
	for k, v := range a.msg {
		msg[k] = v
	}
	body["message"] = msg.encode()
}

// reasoningKey is the member a chat message spells reasoning with.
func (a *fieldAcc) reasoningKey() string {
	if a == nil || a.rsnKey == "" {
		return "reasoning_content"
	}
	return a.rsnKey
}

// wholeToolCalls returns the assembled tool calls as a non-streaming
// response spells them: without the stream's "index".
func wholeToolCalls(calls []validator.ToolCall) []openai.ToolCall {
	out := make([]openai.ToolCall, len(calls))
	for i, c := range calls {
		out[i] = openai.ToolCall{ID: c.ID, Type: "function", Function: openai.FunctionCall{Name: c.Name, Arguments: c.Arguments}}
	}
	return out
}

// ollamaCall is one of Ollama's whole calls in a message.
type ollamaCall struct {
	ID       string `json:"id,omitempty"`
	Function struct {
		Index     *int            `json:"index,omitempty"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// ollamaToolCalls spells assembled calls as Ollama's message carries
// them: arguments as an object.
func ollamaToolCalls(calls []validator.ToolCall) []ollamaCall {
	out := make([]ollamaCall, len(calls))
	for i, c := range calls {
		out[i].ID = c.ID
		out[i].Function.Name = c.Name
		args := json.RawMessage(c.Arguments)
		if len(args) == 0 || !json.Valid(args) {
			args = json.RawMessage("{}")
		}
		out[i].Function.Arguments = args
	}
	return out
}

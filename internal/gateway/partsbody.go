package gateway

import (
	"encoding/json"
	"strings"
)

// partsAcc assembles, for a non-streaming request, the answer of the
// dialects whose answers are made of parts (Messages' content blocks,
// Responses' output items) from the upstream's events: the gateway
// always asks the upstream for a stream, and writes the body its client
// asked for from it.
type partsAcc struct {
	head  rawBody // message_start's message; Responses' last response object
	parts []*partBuild
}

// partBuild is one content block as its events build it.
type partBuild struct {
	block                              rawBody
	text, thinking, signature, partial strings.Builder
}

// addMessages reads one Messages event.
func (a *partsAcc) addMessages(m rawBody) {
	var typ string
	json.Unmarshal(m["type"], &typ)
	var idx int
	idxOK := json.Unmarshal(m["index"], &idx) == nil && idx >= 0 && idx < maxParts
	switch typ {
	case "message_start":
		a.head = m.object("message")
	case "content_block_start":
		if !idxOK {
			return
		}
		for len(a.parts) <= idx {
			a.parts = append(a.parts, nil)
		}
		a.parts[idx] = &partBuild{block: m.object("content_block")}
	case "content_block_delta":
		if !idxOK || idx >= len(a.parts) || a.parts[idx] == nil {
			return
		}
		p, d := a.parts[idx], m.object("delta")
		var dt, s string
		json.Unmarshal(d["type"], &dt)
		switch dt {
		case "text_delta":
			json.Unmarshal(d["text"], &s)
			p.text.WriteString(s)
		case "thinking_delta":
			json.Unmarshal(d["thinking"], &s)
			p.thinking.WriteString(s)
		case "signature_delta":
			json.Unmarshal(d["signature"], &s)
			p.signature.WriteString(s)
		case "input_json_delta":
			json.Unmarshal(d["partial_json"], &s)
			p.partial.WriteString(s)
		}
	case "message_delta":
		if a.head == nil {
			a.head = rawBody{}
		}
		for k, v := range m.object("delta") {
			a.head[k] = v
		}
		if u, ok := m["usage"]; ok {
			a.head["usage"] = mergeJSON(a.head["usage"], u)
		}
	}
}

// message is the Messages answer: the message_start's members, the
// blocks as their deltas built them, the stop_reason and usage of the
// message_delta. The text and reasoning the checks passed are the
// blocks' text and thinking: when a hidden retry continued the released
// text, that prefix goes first; reasoning the policy hides takes its
// thinking blocks with it.
func (a *partsAcc) message(ans *output) rawBody {
	b := a.head.clone()
	if b == nil {
		b = rawBody{}
	}
	b.set("type", "message")
	b.set("role", "assistant")
	blocks := make([]rawBody, 0, len(a.parts))
	var built, thought strings.Builder
	thinking := 0
	for _, p := range a.parts {
		if p == nil {
			continue
		}
		blk := p.block.clone()
		var typ string
		json.Unmarshal(blk["type"], &typ)
		switch typ {
		case "text":
			blk.set("text", textOr(blk["text"], p.text.String()))
			built.WriteString(p.text.String())
		case "thinking":
			if ans.reasoning == "" {
				continue // hidden by the policy (or none): the block goes too
			}
			blk.set("thinking", textOr(blk["thinking"], p.thinking.String()))
			thought.WriteString(p.thinking.String())
			thinking++
			if p.signature.Len() > 0 {
				blk.set("signature", p.signature.String())
			}
		case "tool_use":
			if in := p.partial.String(); in != "" {
				if json.Valid([]byte(in)) {
					blk["input"] = json.RawMessage(in)
				} else {
					blk.set("input", in)
				}
			}
		}
		blocks = append(blocks, blk)
	}
	// The checked reasoning is the one source of what the client reads
	// of it.
	if thinking > 0 && thought.String() != ans.reasoning {
		first := true
		for _, blk := range blocks {
			if string(blk["type"]) == `"thinking"` {
				if first {
					blk.set("thinking", ans.reasoning)
				} else {
					blk.set("thinking", "")
				}
				first = false
			}
		}
	}
	if prefix, ok := strings.CutSuffix(ans.text, built.String()); ok && prefix != "" {
		blocks = withPrefix(blocks, prefix)
	}
	b.set("content", blocks)
	if _, ok := b["stop_reason"]; !ok || string(b["stop_reason"]) == "null" {
		b.set("stop_reason", stopOfFinish(ans.finish))
	}
	return b
}

// textOr is the text a block's deltas built, or, with none, the text its
// start carried.
func textOr(start json.RawMessage, built string) string {
	if built != "" {
		return built
	}
	var s string
	json.Unmarshal(start, &s)
	return s
}

// withPrefix puts the released text of an earlier attempt before the
// first text block (a new text block when there is none).
func withPrefix(blocks []rawBody, prefix string) []rawBody {
	for _, blk := range blocks {
		var typ string
		json.Unmarshal(blk["type"], &typ)
		if typ != "text" {
			continue
		}
		var s string
		json.Unmarshal(blk["text"], &s)
		blk.set("text", prefix+s)
		return blocks
	}
	first := rawBody{}
	first.set("type", "text")
	first.set("text", prefix)
	return append([]rawBody{first}, blocks...)
}

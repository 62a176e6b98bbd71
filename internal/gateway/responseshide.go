package gateway

import (
	"bytes"
	"encoding/json"
)

// reasoningHider is a wire whose events may repeat the reasoning whole
// besides its deltas (a Responses stream's reasoning_text.done, its
// reasoning item's output_item.done, response.completed): under
// reasoning: hide the gateway passes such events through hideReasoning.
type reasoningHider interface {
	// hideReasoning returns p with the reasoning text it repeats taken
	// out, or p itself when it repeats none.
	hideReasoning(p []byte) []byte
}

// hideReasoning blanks the reasoning a Responses event repeats: the text
// of reasoning_text.done and reasoning_summary_text.done, a reasoning
// part's text, and the content and summary of reasoning items (in an
// event's item and in the response's output). The items stay, empty, so
// that the output indexes the client reads do not move.
func (responsesDialect) hideReasoning(p []byte) []byte {
	if !bytes.Contains(p, []byte("reasoning")) && !bytes.Contains(p, []byte("summary_text")) {
		return p
	}
	var ev map[string]json.RawMessage
	if json.Unmarshal(p, &ev) != nil {
		return p
	}
	changed := false
	var typ string
	json.Unmarshal(ev["type"], &typ)
	switch typ {
	case "response.reasoning_text.done", "response.reasoning_summary_text.done":
		if _, ok := ev["text"]; ok {
			ev["text"], changed = json.RawMessage(`""`), true
		}
	}
	if b, ok := blankReasoningPart(ev["part"]); ok {
		ev["part"], changed = b, true
	}
	if b, ok := blankReasoningItem(ev["item"]); ok {
		ev["item"], changed = b, true
	}
	if raw, ok := ev["response"]; ok {
		var resp map[string]json.RawMessage
		var output []json.RawMessage
		if json.Unmarshal(raw, &resp) == nil && json.Unmarshal(resp["output"], &output) == nil {
			blanked := false
			for i, it := range output {
				if b, ok := blankReasoningItem(it); ok {
					output[i], blanked = b, true
				}
			}
			if blanked {
				resp["output"], _ = json.Marshal(output)
				ev["response"], _ = json.Marshal(resp)
				changed = true
			}
		}
	}
	if !changed {
		return p
	}
	out, err := json.Marshal(ev)
	if err != nil {
		return p
	}
	return out
}

// blankReasoningItem returns a reasoning item with empty content and
// summary; false for any other item.
func blankReasoningItem(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	var it map[string]json.RawMessage
	if json.Unmarshal(raw, &it) != nil || string(it["type"]) != `"reasoning"` {
		return nil, false
	}
	for _, k := range []string{"content", "summary"} {
		if _, ok := it[k]; ok {
			it[k] = json.RawMessage(`[]`)
		}
	}
	b, err := json.Marshal(it)
	return b, err == nil
}

// blankReasoningPart returns a reasoning or summary text part with
// empty text; false for any other part.
func blankReasoningPart(raw json.RawMessage) (json.RawMessage, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	var part map[string]json.RawMessage
	if json.Unmarshal(raw, &part) != nil {
		return nil, false
	}
	if t := string(part["type"]); t != `"reasoning_text"` && t != `"summary_text"` {
		return nil, false
	}
	part["text"] = json.RawMessage(`""`)
	b, err := json.Marshal(part)
	return b, err == nil
}

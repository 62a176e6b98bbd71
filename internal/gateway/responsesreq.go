package gateway

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/openai"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// responsesRequest is what the gateway reads of a Responses request; the
// rest reaches the upstream as the client sent it.
type responsesRequest struct {
	Model           string          `json:"model"`
	Stream          bool            `json:"stream"`
	Instructions    string          `json:"instructions"`
	Input           json.RawMessage `json:"input"`
	MaxOutputTokens *int            `json:"max_output_tokens"`
	Tools           []struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"tools"`
	Text *struct {
		Format *struct {
			Type   string          `json:"type"`
			Schema json.RawMessage `json:"schema"`
		} `json:"format"`
	} `json:"text"`
}

// inputItem is one item of a Responses input, as far as the checks read
// it.
type inputItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
}

// decodeResponses reads a Responses request for the checks: the
// instructions as a system message; the input, a string or a list of
// items: messages by role with their text, function_call items as the
// assistant's tool calls, function_call_output items as tool messages
// (screened as the chat API's role "tool" messages are). Reasoning items
// and item types Aegis does not know are passed on unread. With
// previous_response_id the upstream holds the earlier turns: the checks
// see only what this request carries.
func decodeResponses(raw []byte) (request, error) {
	var rr responsesRequest
	if err := json.Unmarshal(raw, &rr); err != nil {
		return request{}, fmt.Errorf("invalid Responses request: %w", openai.DecodeError(err))
	}
	vr := &validator.Request{}
	if rr.Instructions != "" {
		vr.Messages = append(vr.Messages, validator.Message{Role: "system", Content: rr.Instructions})
	}
	switch in := rr.Input; {
	case len(in) == 0 || string(in) == "null":
		return request{}, fmt.Errorf("input is required")
	case in[0] == '"':
		var s string
		json.Unmarshal(in, &s)
		vr.Messages = append(vr.Messages, validator.Message{Role: "user", Content: s})
	default:
		var items []inputItem
		if err := json.Unmarshal(in, &items); err != nil {
			return request{}, fmt.Errorf("input: want a string or a list of items: %w", openai.DecodeError(err))
		}
		var turns validator.TurnBuilder
		for _, m := range vr.Messages {
			turns.Add(m)
		}
		for i, it := range items {
			m, parts, ok, err := itemMessage(it, fmt.Sprintf("input[%d]", i))
			switch {
			case err != nil:
				return request{}, err
			case !ok:
			case m.Role == "user":
				turns.User(m, parts)
			default:
				turns.Add(m)
			}
		}
		vr.Messages = turns.Messages()
	}
	for _, t := range rr.Tools {
		if t.Type == "function" && t.Name != "" {
			vr.Tools = append(vr.Tools, validator.Tool{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
		}
	}
	if rr.MaxOutputTokens != nil {
		vr.MaxTokens = *rr.MaxOutputTokens
	}
	if rr.Text != nil && rr.Text.Format != nil {
		switch f := rr.Text.Format; f.Type {
		case "json_schema", "json_object":
			vr.ResponseFormat = &validator.ResponseFormat{Type: f.Type, Schema: f.Schema}
		}
	}
	return request{model: rr.Model, vreq: vr, stream: rr.Stream}, nil
}

// itemMessage is one input item as the checks see it, with a message's
// text parts in order (a user's harness context is told from them); ok
// is false for items the checks do not read.
func itemMessage(it inputItem, at string) (m validator.Message, parts []string, ok bool, err error) {
	switch it.Type {
	case "", "message":
		switch it.Role {
		case "user", "assistant", "system", "developer":
		default:
			return m, nil, false, fmt.Errorf("%s.role: want user, assistant, system or developer, got %q", at, it.Role)
		}
		parts, err := textParts(it.Content, at+".content")
		if err != nil {
			return m, nil, false, err
		}
		role := it.Role
		if role == "developer" {
			role = "system"
		}
		return validator.Message{Role: role, Content: strings.Join(parts, "")}, parts, true, nil
	case "function_call":
		args := it.Arguments
		if args == "" {
			args = "{}"
		}
		return validator.Message{Role: "assistant", ToolCalls: []validator.ToolCall{{ID: it.CallID, Name: it.Name, Arguments: args}}}, nil, true, nil
	case "function_call_output":
		out := ""
		if len(it.Output) > 0 && string(it.Output) != "null" {
			s, err := partsText(it.Output, at+".output")
			if err != nil {
				return m, nil, false, err
			}
			out = s
		}
		return validator.Message{Role: "tool", ToolCallID: it.CallID, Content: out}, nil, true, nil
	}
	return m, nil, false, nil // reasoning, item_reference, ...: not read
}

// partsText is the text of a string or of a list of content parts (the
// text of input_text, output_text and text parts, in order).
func partsText(raw json.RawMessage, at string) (string, error) {
	parts, err := textParts(raw, at)
	return strings.Join(parts, ""), err
}

// textParts is a string, or the text of each input_text, output_text and
// text part of a list of content parts, in order.
func textParts(raw json.RawMessage, at string) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		json.Unmarshal(raw, &s)
		return []string{s}, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, fmt.Errorf("%s: want a string or a list of content parts: %w", at, openai.DecodeError(err))
	}
	var out []string
	for _, p := range parts {
		switch p.Type {
		case "input_text", "output_text", "text":
			out = append(out, p.Text)
		}
	}
	return out, nil
}

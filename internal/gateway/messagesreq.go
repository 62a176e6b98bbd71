package gateway

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/openai"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// messagesRequest is what the gateway reads of a Messages request; the
// rest reaches the upstream as the client sent it.
type messagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int            `json:"max_tokens"`
	Stream    bool            `json:"stream"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
}

// contentBlock is one block of a message's content, as far as the checks
// read it.
type contentBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// decodeMessages reads a Messages request for the checks: the system
// prompt as a system message; each message's text blocks as its text;
// an assistant's tool_use blocks as its tool calls; a user's tool_result
// blocks as tool messages (screened as the chat API's role "tool"
// messages are). Thinking, images and block types Aegis does not know
// are passed on unread.
func decodeMessages(raw []byte) (request, error) {
	var mr messagesRequest
	if err := json.Unmarshal(raw, &mr); err != nil {
		return request{}, fmt.Errorf("invalid Messages request: %w", openai.DecodeError(err))
	}
	if len(mr.Messages) == 0 {
		return request{}, fmt.Errorf("messages must not be empty")
	}
	vr := &validator.Request{}
	var turns validator.TurnBuilder
	if len(mr.System) > 0 && string(mr.System) != "null" {
		sys, err := blocksText(mr.System, "system")
		if err != nil {
			return request{}, err
		}
		turns.Add(validator.Message{Role: "system", Content: sys})
	}
	for i, m := range mr.Messages {
		at := fmt.Sprintf("messages[%d]", i)
		// Claude Code also sends system-role messages inside messages
		// (llama-server reads them): they are system prompt to the checks.
		if m.Role != "user" && m.Role != "assistant" && m.Role != "system" {
			return request{}, fmt.Errorf("%s.role: want \"user\", \"assistant\" or \"system\", got %q", at, m.Role)
		}
		msg, parts, results, err := messageOf(m.Role, m.Content, at)
		if err != nil {
			return request{}, err
		}
		switch {
		case m.Role == "user":
			if len(parts) > 0 || len(results) == 0 {
				turns.User(msg, parts)
			}
		default:
			turns.Add(msg)
		}
		for _, r := range results {
			turns.Add(r)
		}
	}
	vr.Messages = turns.Messages()
	for _, t := range mr.Tools {
		if t.Name != "" {
			vr.Tools = append(vr.Tools, validator.Tool{Name: t.Name, Description: t.Description, Parameters: t.InputSchema})
		}
	}
	if mr.MaxTokens != nil {
		vr.MaxTokens = *mr.MaxTokens
	}
	return request{model: mr.Model, vreq: vr, stream: mr.Stream}, nil
}

// messageOf reads one message's content (a string or a list of blocks)
// as the checks see it: the message itself with its text, the text parts
// in order (a user's harness context is told from them), and a tool
// message for each tool_result block.
func messageOf(role string, content json.RawMessage, at string) (validator.Message, []string, []validator.Message, error) {
	msg := validator.Message{Role: role}
	if len(content) > 0 && content[0] == '"' {
		json.Unmarshal(content, &msg.Content)
		return msg, []string{msg.Content}, nil, nil
	}
	var blocks []contentBlock
	if err := json.Unmarshal(content, &blocks); err != nil {
		return msg, nil, nil, fmt.Errorf("%s.content: want a string or a list of content blocks: %w", at, openai.DecodeError(err))
	}
	var parts []string
	var results []validator.Message
	for j, b := range blocks {
		bat := fmt.Sprintf("%s.content[%d]", at, j)
		switch b.Type {
		case "":
			return msg, nil, nil, fmt.Errorf("%s: a content block without a type", bat)
		case "text":
			parts = append(parts, b.Text)
		case "tool_use":
			if role != "assistant" {
				return msg, nil, nil, fmt.Errorf("%s: a tool_use block in a %s message", bat, role)
			}
			args := string(b.Input)
			if args == "" || args == "null" {
				args = "{}"
			}
			msg.ToolCalls = append(msg.ToolCalls, validator.ToolCall{Index: len(msg.ToolCalls), ID: b.ID, Name: b.Name, Arguments: args})
		case "tool_result":
			out := ""
			if len(b.Content) > 0 && string(b.Content) != "null" {
				s, err := blocksText(b.Content, bat+".content")
				if err != nil {
					return msg, nil, nil, err
				}
				out = s
			}
			results = append(results, validator.Message{Role: "tool", ToolCallID: b.ToolUseID, Content: out})
		}
	}
	msg.Content = strings.Join(parts, "")
	return msg, parts, results, nil
}

// blocksText is the text of a string or of a list of blocks (the text
// blocks' text, in order).
func blocksText(raw json.RawMessage, at string) (string, error) {
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fmt.Errorf("%s: %w", at, openai.DecodeError(err))
		}
		return s, nil
	}
	var blocks []contentBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", fmt.Errorf("%s: want a string or a list of content blocks: %w", at, openai.DecodeError(err))
	}
	var text strings.Builder
	for _, b := range blocks {
		if b.Type == "text" {
			if text.Len() > 0 {
				text.WriteString("\n")
			}
			text.WriteString(b.Text)
		}
	}
	return text.String(), nil
}

// Package openai holds the OpenAI chat-completion wire types Aegis reads
// (requests, messages with string or multi-part content, tools, tool calls,
// response_format) and pure conversions from them to what the checks need.
// It has no networking; preserving fields it does not model is left to the
// gateway, which keeps the raw body.
package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// ChatRequest is a /v1/chat/completions request body, reduced to the fields
// Aegis interprets. Decoding ignores unknown fields.
type ChatRequest struct {
	Model          string          `json:"model,omitempty"`
	Messages       []Message       `json:"messages"`
	Stream         bool            `json:"stream,omitempty"`
	MaxTokens      *int            `json:"max_tokens,omitempty"`
	MaxCompletion  *int            `json:"max_completion_tokens,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	ResponseFormat *ResponseFormat `json:"response_format,omitempty"`
	Tools          []Tool          `json:"tools,omitempty"`
	ToolChoice     json.RawMessage `json:"tool_choice,omitempty"`
}

// Message is one chat message. Content is a string or an array of parts;
// use Text for its text.
type Message struct {
	Role       string     `json:"role"`
	Content    Content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Content is a message's content: a plain string, an array of content
// parts, or null. It re-encodes in the shape it was decoded from.
type Content struct {
	// Text is set when the content was a string.
	Text string
	// Parts is set when the content was an array of parts.
	Parts []ContentPart
	// IsParts records that the content was an array (possibly empty).
	IsParts bool
	// IsNull records that the content was null or absent.
	IsNull bool
}

// ContentPart is one element of an array content: {"type":"text","text":..}
// or another type (image_url, input_audio) that Aegis does not read.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text,omitempty"`
	// Raw keeps the part as received, so non-text parts re-encode intact.
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON accepts a string, an array of parts or null.
// plainString decodes the JSON string b when it needs no decoding: quotes
// around valid UTF-8 with no escape, control character or inner quote.
// Anything else is left to encoding/json (false), which repairs and
// unescapes.
func plainString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' || b[len(b)-1] != '"' {
		return "", false
	}
	in := b[1 : len(b)-1]
	for _, c := range in {
		if c < 0x20 || c == '"' || c == '\\' {
			return "", false
		}
	}
	if !utf8.Valid(in) {
		return "", false
	}
	return string(in), true
}

func (c *Content) UnmarshalJSON(b []byte) error {
	*c = Content{}
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || string(b) == "null":
		c.IsNull = true
		return nil
	case b[0] == '"':
		if t, ok := plainString(b); ok {
			c.Text = t
			return nil
		}
		if err := json.Unmarshal(b, &c.Text); err != nil {
			return fmt.Errorf("content: %w", err)
		}
		return nil
	case b[0] == '[':
		var raws []json.RawMessage
		if err := json.Unmarshal(b, &raws); err != nil {
			return fmt.Errorf("content parts: %w", err)
		}
		c.IsParts = true
		c.Parts = make([]ContentPart, 0, len(raws))
		for i, r := range raws {
			var p struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(r, &p); err != nil {
				return fmt.Errorf("content part %d: %w", i, err)
			}
			c.Parts = append(c.Parts, ContentPart{Type: p.Type, Text: p.Text, Raw: r})
		}
		return nil
	}
	return fmt.Errorf("content: want a string, an array of parts or null, got %.20q", b)
}

// MarshalJSON encodes the content in the shape it was decoded from.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.IsParts:
		out := make([]json.RawMessage, 0, len(c.Parts))
		for _, p := range c.Parts {
			if len(p.Raw) > 0 {
				out = append(out, p.Raw)
				continue
			}
			b, err := json.Marshal(struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}{p.Type, p.Text})
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
		return json.Marshal(out)
	case c.IsNull && c.Text == "":
		return []byte("null"), nil
	}
	return json.Marshal(c.Text)
}

// String returns the text of the content: the string, or the text parts
// joined by newlines.
func (c Content) String() string {
	if !c.IsParts {
		return c.Text
	}
	var sb strings.Builder
	for _, p := range c.Parts {
		if p.Type != "text" && p.Type != "input_text" {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(p.Text)
	}
	return sb.String()
}

// TextContent returns a Content holding the string s.
func TextContent(s string) Content { return Content{Text: s} }

// ResponseFormat is the request's response_format.
type ResponseFormat struct {
	// Type is "text", "json_object" or "json_schema".
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
	// Schema is llama-server's extension: a schema directly under
	// response_format (with type json_object or json_schema).
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Validator returns the format the checks hold the output to: the type,
// and the schema from json_schema.schema or llama-server's schema.
func (rf *ResponseFormat) Validator() *validator.ResponseFormat {
	f := &validator.ResponseFormat{Type: rf.Type, Schema: rf.Schema}
	if rf.JSONSchema != nil && len(rf.JSONSchema.Schema) > 0 {
		f.Schema = rf.JSONSchema.Schema
	}
	return f
}

// JSONSchema is response_format.json_schema.
type JSONSchema struct {
	Name   string          `json:"name,omitempty"`
	Strict *bool           `json:"strict,omitempty"`
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Tool is one entry of tools.
type Tool struct {
	Type     string       `json:"type"`
	Function FunctionSpec `json:"function"`
}

// FunctionSpec declares a function the model may call.
type FunctionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolCall is one call in an assistant message's (or a stream delta's)
// tool_calls. Index is set in streaming deltas.
type ToolCall struct {
	Index    *int         `json:"index,omitempty"`
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type,omitempty"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is the function and its arguments (raw JSON text as the
// model produced it).
type FunctionCall struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// UnmarshalJSON reads arguments as OpenAI spells them, a string holding
// JSON text, or as Ollama does, a JSON object (in a chat history its
// clients send back an earlier call that way), kept as its JSON text.
func (f *FunctionCall) UnmarshalJSON(b []byte) error {
	var w struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*f = FunctionCall{Name: w.Name}
	args := bytes.TrimSpace(w.Arguments)
	switch {
	case len(args) == 0 || string(args) == "null":
	case args[0] == '"':
		if err := json.Unmarshal(args, &f.Arguments); err != nil {
			return fmt.Errorf("arguments: %w", err)
		}
	case args[0] == '{':
		f.Arguments = string(args)
	default:
		return fmt.Errorf("arguments: want a string or an object, got %.20q", args)
	}
	return nil
}

// Validator returns the call as the checks see it; i is its position when
// Index is absent.
func (c ToolCall) Validator(i int) validator.ToolCall {
	idx := i
	if c.Index != nil {
		idx = *c.Index
	}
	return validator.ToolCall{Index: idx, ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments}
}

// ValidatorRequest returns what the checks may know about r: message texts,
// the response format with its schema, the declared tools and max_tokens.
func (r *ChatRequest) ValidatorRequest() *validator.Request {
	vr := &validator.Request{Messages: make([]validator.Message, 0, len(r.Messages))}
	for _, m := range r.Messages {
		vm := validator.Message{Role: m.Role, Content: m.Content.String(), Name: m.Name, ToolCallID: m.ToolCallID}
		for i, c := range m.ToolCalls {
			vm.ToolCalls = append(vm.ToolCalls, c.Validator(i))
		}
		vr.Messages = append(vr.Messages, vm)
	}
	if rf := r.ResponseFormat; rf != nil {
		vr.ResponseFormat = rf.Validator()
	}
	for _, t := range r.Tools {
		if t.Function.Name == "" {
			continue
		}
		vr.Tools = append(vr.Tools, validator.Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	switch {
	case r.MaxTokens != nil:
		vr.MaxTokens = *r.MaxTokens
	case r.MaxCompletion != nil:
		vr.MaxTokens = *r.MaxCompletion
	}
	return vr
}

// Package mcp puts the Sentinel in front of Model Context Protocol
// servers: a proxy for the stdio and Streamable HTTP transports that
// passes every message through unchanged except the ones it judges. It
// screens the tools a server lists (poisoned descriptions, and tools that
// changed since they were first seen: pinning), checks the arguments of
// every tools/call before the server sees them, and checks what a tool
// returns (secrets, injected instructions, size) before the client does.
//
// The judging lives in Judge and Session, which know nothing of the
// transport; stdio.go and http.go move the bytes.
package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Kind is what a JSON-RPC message is.
type Kind int

// The kinds of JSON-RPC message.
const (
	KindRequest      Kind = iota // has a method and an id
	KindNotification             // has a method, no id
	KindResponse                 // has an id and a result or an error
)

func (k Kind) String() string {
	switch k {
	case KindRequest:
		return "request"
	case KindNotification:
		return "notification"
	case KindResponse:
		return "response"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Message is one JSON-RPC 2.0 message with its parts kept raw: the proxy
// forwards Raw unchanged unless it has a reason to rewrite it.
type Message struct {
	Raw    []byte
	Kind   Kind
	ID     json.RawMessage // nil for a notification
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  json.RawMessage
}

// IDKey returns the id as a map key that tells 1 from "1".
func (m *Message) IDKey() string { return string(bytes.TrimSpace(m.ID)) }

// envelope is the wire shape; unknown members are ignored here and kept in
// Raw.
type envelope struct {
	JSONRPC *string         `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   json.RawMessage `json:"error"`
}

// ErrorCode is a JSON-RPC error code with the text that explains a
// malformed message.
type decodeError struct {
	code int
	msg  string
}

func (e *decodeError) Error() string { return e.msg }

// Code returns the JSON-RPC error code for a decode error from Decode
// (parse error or invalid request), or internal error for any other.
func Code(err error) int {
	var d *decodeError
	if errors.As(err, &d) {
		return d.code
	}
	return jsonrpc.CodeInternalError
}

// Decode parses one JSON-RPC message. A batch (a JSON array) is refused:
// the protocol dropped batching, and a batch would carry calls around the
// checks. The error names what is wrong; Code gives its JSON-RPC code.
func Decode(raw []byte) (*Message, error) {
	b := bytes.TrimSpace(raw)
	if len(b) == 0 {
		return nil, &decodeError{jsonrpc.CodeInvalidRequest, "empty message"}
	}
	if b[0] == '[' {
		return nil, &decodeError{jsonrpc.CodeInvalidRequest, "JSON-RPC batches are not accepted: send one message at a time"}
	}
	if b[0] != '{' {
		return nil, &decodeError{jsonrpc.CodeParseError, "not a JSON object"}
	}
	var e envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return nil, &decodeError{jsonrpc.CodeParseError, "invalid JSON: " + err.Error()}
	}
	if e.JSONRPC == nil || *e.JSONRPC != "2.0" {
		return nil, &decodeError{jsonrpc.CodeInvalidRequest, `"jsonrpc" must be "2.0"`}
	}
	m := &Message{Raw: raw, Params: e.Params, Result: e.Result, Error: e.Error}
	if len(e.ID) > 0 && !bytes.Equal(e.ID, []byte("null")) {
		if err := validID(e.ID); err != nil {
			return nil, err
		}
		m.ID = e.ID
	}
	switch {
	case e.Method != nil:
		if *e.Method == "" {
			return nil, &decodeError{jsonrpc.CodeInvalidRequest, `"method" is empty`}
		}
		if e.Result != nil || e.Error != nil {
			return nil, &decodeError{jsonrpc.CodeInvalidRequest, `a message with "method" cannot carry "result" or "error"`}
		}
		m.Method = *e.Method
		m.Kind = KindNotification
		if m.ID != nil {
			m.Kind = KindRequest
		}
	case e.Result != nil || e.Error != nil:
		if e.Result != nil && e.Error != nil {
			return nil, &decodeError{jsonrpc.CodeInvalidRequest, `a response carries "result" or "error", not both`}
		}
		m.Kind = KindResponse
		m.ID = e.ID // a response to an unparseable request has id null
	default:
		return nil, &decodeError{jsonrpc.CodeInvalidRequest, `neither "method" nor "result"/"error"`}
	}
	return m, nil
}

func validID(id json.RawMessage) error {
	switch id[0] {
	case '"':
		var s string
		if json.Unmarshal(id, &s) == nil {
			return nil
		}
	default:
		if _, err := strconv.ParseFloat(string(id), 64); err == nil {
			return nil
		}
	}
	return &decodeError{jsonrpc.CodeInvalidRequest, fmt.Sprintf(`"id" must be a string or a number, got %s`, truncate(string(id), 40))}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// rpcError is the "error" member of a JSON-RPC response.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
	Data    any    `json:"data,omitempty"`
}

// ErrorResponse encodes a JSON-RPC error response to id (nil: null).
func ErrorResponse(id json.RawMessage, code int, msg string, data any) []byte {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, msg, data}})
	if err != nil { // data that cannot be encoded: drop it
		b, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   rpcError        `json:"error"`
		}{"2.0", id, rpcError{Code: code, Message: msg}})
	}
	return b
}

// ResultResponse encodes a JSON-RPC result response to id.
func ResultResponse(id json.RawMessage, result any) ([]byte, error) {
	return json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}{"2.0", id, result})
}

// Notification encodes a JSON-RPC notification.
func Notification(method string, params any) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}{"2.0", method, params})
	return b
}

// Error codes the proxy answers with beside the standard ones.
const (
	// CodeRefused: a check refused the call (data names the reason code).
	CodeRefused = -32001
	// CodeTimeout: the server did not answer in time.
	CodeTimeout = -32002
	// CodeServerGone: the server exited or closed before answering.
	CodeServerGone = -32003
)

package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Approval by a person in `aegis mcp`: a call whose verdict is approve
// (the policy's approval section and an approve rule) is held, and the
// client is asked with an elicitation/create request when it declared the
// elicitation capability and the transport can carry a request to it
// (stdio). The call goes to the server only when the client accepts with
// approve: true; a decline, a cancel, an error or no answer within
// call_timeout refuses it. Without elicitation the call is refused.

// elicitPrefix starts the ids of Aegis's own requests to the client.
const elicitPrefix = `"aegis-approval-`

// elicitState is a session's approvals: the calls waiting for the
// client's approval, by the id of Aegis's elicitation request; canElicit
// says the transport can send the client a request, clientElicits that
// the client declared the capability.
type elicitState struct {
	held          map[string]*heldCall
	canElicit     bool
	clientElicits bool
}

// heldCall is a tools/call waiting for the client's answer.
type heldCall struct {
	key  string // the call's id
	id   json.RawMessage
	raw  []byte // the call as the client sent it
	c    *call
	v    validator.Verdict
	tool string
}

var elicitSeq atomic.Uint64

// noteCapabilities remembers whether the client can answer elicitation
// requests (its initialize params).
func (s *Session) noteCapabilities(params json.RawMessage) {
	var p struct {
		Capabilities struct {
			Elicitation json.RawMessage `json:"elicitation"`
		} `json:"capabilities"`
	}
	if json.Unmarshal(params, &p) == nil {
		s.mu.Lock()
		s.clientElicits = len(p.Capabilities.Elicitation) > 0 && string(p.Capabilities.Elicitation) != "null"
		s.mu.Unlock()
	}
}

// askApproval holds the call and returns the elicitation request to send
// the client, or nil when the verdict is not approve or the client cannot
// be asked (the call is then refused).
func (s *Session) askApproval(m *Message, c *call, v *validator.Verdict, tool string, args json.RawMessage) []byte {
	s.mu.Lock()
	ok := v.Action == validator.ActionApprove && s.clientElicits && s.canElicit
	s.mu.Unlock()
	if !ok {
		return nil
	}
	id := json.RawMessage(fmt.Sprintf(`%s%d"`, elicitPrefix, elicitSeq.Add(1)))
	h := &heldCall{key: m.IDKey(), id: bytes.Clone(m.ID), raw: bytes.Clone(m.Raw), c: c, v: *v, tool: tool} // the reader reuses its buffer
	s.mu.Lock()
	if s.held == nil {
		s.held = map[string]*heldCall{}
	}
	s.held[string(id)] = h
	c.held = true
	s.mu.Unlock()
	paths := approval.Paths(string(args))
	rec := events.ApprovalRecord{ID: strings.Trim(string(id), `"`), RequestID: c.reqID, Time: s.p.now(), Deadline: c.deadline,
		Stage: approval.Proposed.String(), Calls: []events.ApprovalCall{{Tool: tool, Paths: paths}}, Reason: string(v.Reason),
		ArgsHash: approval.ArgsHash([]validator.ToolCall{{Name: tool, Arguments: string(args)}})}
	s.p.publish(events.Event{Kind: events.Approval, RequestID: c.reqID, Route: routePrefix + c.method, Upstream: s.p.Server, Model: tool, Approval: &rec})
	msg := fmt.Sprintf("Aegis holds a call to the tool %q (arguments: %s) for your approval: the policy asks a person before it goes out (%s). Approve it?",
		tool, strings.Join(paths, ", "), v.Reason)
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "elicitation/create", "params": map[string]any{
		"message": msg,
		"requestedSchema": map[string]any{"type": "object", "required": []string{"approve"}, "properties": map[string]any{
			"approve": map[string]any{"type": "boolean", "title": "Approve", "description": "Send the call to the server"}}},
	}})
	return b
}

// answered handles the client's answer to an elicitation request of
// Aegis's: the held call goes to the server, or the client gets the
// refusal. ok is false for any other response.
func (s *Session) answered(m *Message) (toServer, toClient []byte, ok bool) {
	key := m.IDKey()
	if !strings.HasPrefix(key, elicitPrefix) {
		return nil, nil, false
	}
	s.mu.Lock()
	h := s.held[key]
	delete(s.held, key)
	if h != nil {
		if _, pending := s.pending[h.key]; !pending {
			h = nil // timed out or cancelled meanwhile
		} else {
			h.c.held = false
		}
	}
	s.mu.Unlock()
	if h == nil {
		return nil, nil, true
	}
	var res struct {
		Action  string `json:"action"`
		Content struct {
			Approve bool `json:"approve"`
		} `json:"content"`
	}
	approved := m.Error == nil && json.Unmarshal(m.Result, &res) == nil && res.Action == "accept" && res.Content.Approve
	stage := approval.Denied
	if approved {
		stage = approval.Approved
	}
	rec := events.ApprovalRecord{ID: strings.Trim(key, `"`), RequestID: h.c.reqID, Time: s.p.now(), Stage: stage.String(),
		Calls: []events.ApprovalCall{{Tool: h.tool}}, Reason: string(h.v.Reason), By: "the MCP client"}
	s.p.publish(events.Event{Kind: events.Approval, RequestID: h.c.reqID, Route: routePrefix + h.c.method, Upstream: s.p.Server, Model: h.tool, Approval: &rec})
	if approved {
		return h.raw, nil, true
	}
	s.forget(h.key)
	v := h.v
	v.Action = validator.ActionBlock
	s.p.finish(h.c, &v, events.OutcomeBlocked, OutcomeRefused, s.p.now())
	return nil, ErrorResponse(h.id, CodeRefused, fmt.Sprintf("aegis_%s: Aegis refused the call to tool %q: the person asked did not approve it", v.Reason, h.tool),
		map[string]any{"reason": v.Reason, "tool": h.tool}), true
}

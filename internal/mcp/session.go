package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Route is the events' route for MCP traffic: "mcp " and the method.
const routePrefix = "mcp "

// Proxy is what the sessions of one proxied server share: the judge, the
// server's name (for pins, metrics and incidents), the event bus, and the
// tools hidden from its listings.
type Proxy struct {
	Judge  *Judge
	Server string
	Bus    *events.Bus
	// Metrics counts calls; nil counts nothing.
	Metrics *Metrics
	// Clock is the clock for timeouts and timings; nil means the wall
	// clock.
	Clock clock.Clock
	// Reaper is the path of a program whose main runs reaper.Main when
	// reaper.Child reports true (the aegis binary itself): RunStdio starts
	// the server under it, so nothing the server starts outlives Aegis.
	// Empty: the server is started directly.
	Reaper string

	mu      sync.Mutex
	hidden  map[string]validator.Finding // items hidden from listings, by path: requests for them are refused
	schemas map[string]json.RawMessage   // the input schema of every tool listed, by name
}

func (p *Proxy) schema(name string) json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.schemas[name]
}

func (p *Proxy) setSchema(name string, schema json.RawMessage) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.schemas == nil {
		p.schemas = map[string]json.RawMessage{}
	}
	p.schemas[name] = schema
}

func (p *Proxy) now() time.Time { return clock.Or(p.Clock).Now() }

// hiddenItem reports a tool, prompt or resource hidden from its listing
// ("tools/NAME", "prompts/NAME", "resources/URI"): requests for it are
// refused.
func (p *Proxy) hiddenItem(item string) (validator.Finding, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, ok := p.hidden[item]
	return f, ok
}

func (p *Proxy) setHidden(name string, f *validator.Finding) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f == nil {
		delete(p.hidden, name)
		return
	}
	if p.hidden == nil {
		p.hidden = map[string]validator.Finding{}
	}
	p.hidden[name] = *f
}

// call is a client request in flight.
type call struct {
	method, tool string
	reqID        string // the events' request id (tools/call only)
	start        time.Time
	deadline     time.Time
	held         bool // waiting for the client's approval (elicit.go)
}

// Session is the judging state of one client connection (a stdio pipe, or
// one Mcp-Session-Id): the client's requests in flight, by id. It is safe
// for concurrent use.
type Session struct {
	p           *Proxy
	mu          sync.Mutex
	elicitState // calls held for the client's approval (elicit.go), under mu
	// pending are the client's requests the server has not answered.
	pending map[string]*call
	// earlier are the session's calls let through and the results
	// forwarded, for the flow rule (see Judge.JudgeCallAfter).
	earlier      []validator.Message
	earlierBytes int
	// reply sends a message to the server (an answer to a server request
	// Aegis refused); set by the transport.
	reply func([]byte)
	// wake is signalled when a call with a deadline starts, so the
	// transport's timer re-arms.
	wake chan struct{}
}

// Bounds on what a session remembers for the flow rule: the latest
// calls and results, up to these.
const (
	maxEarlier      = 64
	maxEarlierBytes = 1 << 20
)

// remember records a call let through or a result forwarded.
func (s *Session) remember(m validator.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(m.Content)
	for _, c := range m.ToolCalls {
		n += len(c.Arguments)
	}
	s.earlier = append(s.earlier, m)
	s.earlierBytes += n
	for len(s.earlier) > maxEarlier || s.earlierBytes > maxEarlierBytes && len(s.earlier) > 1 {
		d := s.earlier[0]
		s.earlierBytes -= len(d.Content)
		for _, c := range d.ToolCalls {
			s.earlierBytes -= len(c.Arguments)
		}
		s.earlier = s.earlier[1:]
	}
}

// history returns a copy of what the session remembers.
func (s *Session) history() []validator.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]validator.Message(nil), s.earlier...)
}

// NewSession starts the state of one client connection.
func (p *Proxy) NewSession() *Session {
	return &Session{p: p, pending: map[string]*call{}, wake: make(chan struct{}, 1)}
}

// nextDeadline returns the earliest deadline of the calls in flight.
func (s *Session) nextDeadline() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	for _, c := range s.pending {
		if !c.deadline.IsZero() && (next.IsZero() || c.deadline.Before(next)) {
			next = c.deadline
		}
	}
	return next, !next.IsZero()
}

// FromClient judges one message from the client. It returns what to send
// the server (nil: nothing) and what to answer the client at once (nil:
// nothing): an error for a malformed message, a duplicate id or a refused
// call.
func (s *Session) FromClient(ctx context.Context, raw []byte) (toServer, toClient []byte) {
	if !utf8.Valid(raw) { // JSON is UTF-8; a server may drop such a line without an answer
		at := invalidAt(raw)
		return nil, ErrorResponse(lenientID(raw), jsonrpc.CodeParseError,
			fmt.Sprintf("aegis: malformed JSON-RPC message from the client: invalid UTF-8 at byte %d", at), nil)
	}
	m, err := Decode(raw)
	if err != nil {
		return nil, ErrorResponse(lenientID(raw), Code(err), "aegis: malformed JSON-RPC message from the client: "+err.Error(), nil)
	}
	switch m.Kind {
	case KindNotification:
		if m.Method == "notifications/cancelled" {
			s.cancelled(m.Params)
		}
		return raw, nil
	case KindResponse:
		if up, back, ok := s.answered(m); ok {
			return up, back
		}
		return raw, nil // an answer to the server's sampling, elicitation or roots request
	}
	key := m.IDKey()
	now := s.p.now()
	c := &call{method: m.Method, start: now}
	if t := s.p.Judge.Config.CallTimeout; t > 0 {
		c.deadline = now.Add(t)
	}
	// What the call names is set before it is in flight: the timer may
	// expire it at once.
	var params struct {
		Name      string          `json:"name"`
		URI       string          `json:"uri"`
		Arguments json.RawMessage `json:"arguments"`
	}
	switch m.Method {
	case "tools/call":
		if err := json.Unmarshal(m.Params, &params); err != nil || params.Name == "" {
			return nil, ErrorResponse(m.ID, jsonrpc.CodeInvalidParams, "aegis: tools/call needs params with a tool name", nil)
		}
		c.tool, c.reqID = params.Name, newRequestID()
	case "prompts/get":
		_ = json.Unmarshal(m.Params, &params)
		c.tool = params.Name
	case "resources/read":
		_ = json.Unmarshal(m.Params, &params)
		c.tool = params.URI
	}
	s.mu.Lock()
	_, dup := s.pending[key]
	if !dup {
		s.pending[key] = c
	}
	s.mu.Unlock()
	if !dup && !c.deadline.IsZero() {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	if dup {
		return nil, ErrorResponse(m.ID, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("aegis: duplicate request id %s: a request with this id is still in flight", truncate(key, 40)), nil)
	}
	if m.Method == "initialize" {
		s.noteCapabilities(m.Params)
	}
	switch m.Method {
	case "prompts/get":
		return s.requestItem(m, c, key, "prompts/"+c.tool, raw)
	case "resources/read":
		return s.requestItem(m, c, key, "resources/"+c.tool, raw)
	case "tools/call":
	default:
		return raw, nil
	}
	s.p.publish(events.Event{Kind: events.RequestStarted, RequestID: c.reqID, Route: routePrefix + "tools/call", Upstream: s.p.Server, Model: c.tool})
	v := s.judgeCall(ctx, c, params.Name, params.Arguments)
	if v == nil {
		return raw, nil
	}
	if ask := s.askApproval(m, c, v, params.Name, params.Arguments); ask != nil {
		return nil, ask
	}
	s.forget(key)
	v.Action = validator.ActionBlock
	text := ""
	if s.p.Judge.LogText() { // the text the findings' offsets point into
		text = argumentText(params.Arguments)
	}
	s.p.finishText(c, v, events.OutcomeBlocked, OutcomeRefused, now, text)
	msg := fmt.Sprintf("aegis_%s: Aegis refused the call to tool %q", v.Reason, params.Name)
	if len(v.Findings) > 0 && v.Findings[0].Message != "" {
		msg += ": " + v.Findings[0].Message
	}
	return nil, ErrorResponse(m.ID, CodeRefused, msg, map[string]any{"reason": v.Reason, "tool": params.Name, "verdict": v})
}

// requestItem notes which prompt or resource a prompts/get or
// resources/read asks for, and refuses one hidden from its listing.
func (s *Session) requestItem(m *Message, c *call, key, item string, raw []byte) (toServer, toClient []byte) {
	f, ok := s.p.hiddenItem(item)
	if !ok {
		return raw, nil
	}
	s.forget(key)
	return nil, ErrorResponse(m.ID, CodeRefused, fmt.Sprintf("aegis_%s: Aegis refused %s %q: it was hidden from the listing: %s", f.Reason, m.Method, c.tool, f.Message),
		map[string]any{"reason": f.Reason})
}

func (s *Session) judgeCall(ctx context.Context, c *call, name string, args json.RawMessage) *validator.Verdict {
	if f, ok := s.p.hiddenItem("tools/" + name); ok {
		return failVerdict(f.Reason, validator.RiskHigh, f)
	}
	v, err := s.p.Judge.JudgeCallAfter(ctx, s.p.Server, c.reqID, name, args, s.p.schema(name), s.history())
	if err != nil {
		return failVerdict(validator.ReasonGuardUnavailable, validator.RiskMedium,
			validator.Finding{Check: "mcp", Reason: validator.ReasonGuardUnavailable, Message: err.Error()})
	}
	if v == nil {
		s.remember(validator.Message{Role: "assistant", ToolCalls: []validator.ToolCall{{ID: c.reqID, Name: name, Arguments: string(args)}}})
	}
	return v
}

func (s *Session) forget(key string) {
	s.mu.Lock()
	delete(s.pending, key)
	s.mu.Unlock()
}

// cancelled drops a request the client cancelled: the server should not
// answer it, and if it does, the answer is judged by its shape.
func (s *Session) cancelled(params json.RawMessage) {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil || len(p.RequestID) == 0 {
		return
	}
	key := string(bytes.TrimSpace(p.RequestID))
	s.mu.Lock()
	c := s.pending[key]
	delete(s.pending, key)
	s.mu.Unlock()
	if c != nil && c.reqID != "" {
		s.p.finish(c, nil, events.OutcomeCancelled, OutcomeCancelled, s.p.now())
	}
}

// FromServer judges one message from the server and returns what to send
// the client (nil: nothing). Requests and notifications pass unchanged;
// responses to tools/list, tools/call and tasks/result are judged.
func (s *Session) FromServer(ctx context.Context, raw []byte) []byte {
	m, err := Decode(raw)
	if err != nil {
		s.p.Judge.Log.Warn("mcp: dropped a malformed message from the server", "server", s.p.Server, "err", err.Error())
		return nil
	}
	switch m.Kind {
	case KindRequest:
		return s.judgeServerRequest(ctx, m)
	case KindNotification:
		return raw
	}
	key := m.IDKey()
	s.mu.Lock()
	c, ok := s.pending[key]
	delete(s.pending, key)
	s.mu.Unlock()
	if !ok {
		// An answer to nothing in flight: a timed-out or cancelled call, or
		// one replayed on a resumed stream. Judge it by its shape.
		return s.judgeByShape(ctx, m)
	}
	return s.judgeResponse(ctx, m, c)
}

func (s *Session) judgeResponse(ctx context.Context, m *Message, c *call) []byte {
	if _, ok := listings[c.method]; ok && m.Result != nil {
		return s.judgeList(ctx, m, c.method)
	}
	switch c.method {
	case "prompts/get", "resources/read":
		if m.Result == nil {
			return m.Raw
		}
		return s.judgeContents(ctx, m, c)
	case "tools/call", "tasks/result":
		if m.Result == nil {
			if c.reqID != "" {
				s.p.finish(c, nil, events.OutcomeRejected, OutcomeError, s.p.now())
			}
			return m.Raw
		}
		return s.judgeResult(ctx, m, c)
	}
	return m.Raw
}

func (s *Session) judgeByShape(ctx context.Context, m *Message) []byte {
	if m.Result == nil {
		return m.Raw
	}
	var shape struct {
		Tools   json.RawMessage `json:"tools"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(m.Result, &shape) != nil {
		return m.Raw
	}
	switch {
	case shape.Tools != nil:
		return s.judgeList(ctx, m, "tools/list")
	case shape.Content != nil:
		return s.judgeResult(ctx, m, &call{method: "tools/call", tool: "(unknown)", start: s.p.now()})
	}
	return m.Raw
}

func (s *Session) judgeResult(ctx context.Context, m *Message, c *call) []byte {
	id := c.reqID
	if id == "" {
		id = newRequestID()
	}
	jr := s.p.Judge.JudgeResult(ctx, id, c.tool, m.Result)
	out, v, outcome := jr.Result, jr.Verdict, jr.Outcome
	if outcome != ResultWithheld && jr.Text != "" {
		s.remember(validator.Message{Role: "tool", ToolCallID: c.reqID, Content: jr.Text})
	}
	text := ""
	if s.p.Judge.LogText() { // the text the findings' offsets point into
		text = jr.Text
	}
	if c.reqID == "" && outcome != ResultPassed { // tasks/result or an answer by shape: a request of its own in the log
		c.reqID = id
		s.p.publish(events.Event{Kind: events.RequestStarted, RequestID: id, Route: routePrefix + c.method, Upstream: s.p.Server, Model: c.tool})
	}
	if c.reqID != "" {
		switch outcome {
		case ResultPassed:
			s.p.finish(c, nil, events.OutcomeReleased, OutcomeAllowed, s.p.now())
		case ResultRedacted:
			s.p.finishText(c, v, events.OutcomeRedacted, OutcomeRedacted, s.p.now(), text)
		case ResultWithheld:
			s.p.finishText(c, v, events.OutcomeHalted, OutcomeWithheld, s.p.now(), text)
		}
	}
	if outcome == ResultPassed {
		return m.Raw
	}
	b, err := ResultResponse(m.ID, out)
	if err != nil {
		return ErrorResponse(m.ID, jsonrpc.CodeInternalError, "aegis: could not encode the judged result", nil)
	}
	return b
}

// Abort answers every request in flight with an error (the server exited
// or closed its stream) and forgets them.
func (s *Session) Abort(code int, msg string) [][]byte {
	s.mu.Lock()
	pending := s.pending
	s.pending = map[string]*call{}
	s.mu.Unlock()
	out := make([][]byte, 0, len(pending))
	now := s.p.now()
	for key, c := range pending {
		out = append(out, ErrorResponse(json.RawMessage(key), code, msg, nil))
		if c.reqID != "" {
			s.p.finish(c, nil, events.OutcomeHalted, OutcomeServerGone, now)
		}
	}
	return out
}

// Expire answers the requests past their deadline with a timeout error
// and returns the cancellations to send the server.
func (s *Session) Expire(now time.Time) (toClient, toServer [][]byte) {
	s.mu.Lock()
	var keys []string
	var calls []*call
	for k, c := range s.pending {
		if !c.deadline.IsZero() && !now.Before(c.deadline) {
			keys = append(keys, k)
			calls = append(calls, c)
			delete(s.pending, k)
		}
	}
	s.mu.Unlock()
	for i, k := range keys {
		c := calls[i]
		if c.held { // the server never saw it: nobody approved it in time
			toClient = append(toClient, ErrorResponse(json.RawMessage(k), CodeRefused,
				fmt.Sprintf("aegis: nobody approved the call to tool %q within %s (call_timeout): refused", c.tool, s.p.Judge.Config.CallTimeout), nil))
			s.p.finish(c, nil, events.OutcomeBlocked, OutcomeRefused, now)
			continue
		}
		toClient = append(toClient, ErrorResponse(json.RawMessage(k), CodeTimeout,
			fmt.Sprintf("aegis: the server did not answer %s within %s (call_timeout)", c.method, s.p.Judge.Config.CallTimeout), nil))
		toServer = append(toServer, Notification("notifications/cancelled", map[string]any{
			"requestId": json.RawMessage(k), "reason": "timed out in Aegis"}))
		if c.reqID != "" {
			s.p.finish(c, nil, events.OutcomeHalted, OutcomeTimeout, now)
		}
	}
	return toClient, toServer
}

// Pending returns how many client requests are in flight.
func (s *Session) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// invalidAt returns the offset of the first invalid UTF-8 byte in b.
func invalidAt(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// lenientID digs the id out of a message that did not decode, so its
// error can still be matched to it; null when there is none.
func lenientID(raw []byte) json.RawMessage {
	var e struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &e) == nil && len(e.ID) > 0 && validID(e.ID) == nil {
		return e.ID
	}
	return nil
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "mcp-" + hex.EncodeToString(b[:])
}

func (p *Proxy) publish(e events.Event) { p.Bus.Publish(e) }

// finish publishes the end of a tools/call: a Halt carrying the verdict
// when one failed (the incident), and RequestFinished with the outcome.
func (p *Proxy) finish(c *call, v *validator.Verdict, outcome, metric string, now time.Time) {
	p.finishText(c, v, outcome, metric, now, "")
}

// finishText is finish with the text the verdict judged, for the
// incident; it is given only when the policy allows logging text.
func (p *Proxy) finishText(c *call, v *validator.Verdict, outcome, metric string, now time.Time, text string) {
	if v != nil {
		p.publish(events.Event{Kind: events.Halt, RequestID: c.reqID, Route: routePrefix + c.method, Upstream: p.Server, Model: c.tool, Attempt: 1, Verdict: v, Text: text})
	}
	p.publish(events.Event{Kind: events.RequestFinished, RequestID: c.reqID, Route: routePrefix + c.method, Upstream: p.Server,
		Model: c.tool, Outcome: outcome, Duration: now.Sub(c.start)})
	p.Metrics.call(p.Server, p.metricTool(c.tool), metric)
}

// metricTool bounds the tool label to the tools the server listed, so a
// client naming random tools cannot grow the metrics without end.
func (p *Proxy) metricTool(name string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.schemas[name]; ok || len(p.schemas) == 0 && name == "(unknown)" {
		return name
	}
	return "(unlisted)"
}

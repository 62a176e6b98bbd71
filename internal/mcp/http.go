package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/aegis-sentinel/aegis/internal/clock"
)

// HTTPProxy is a Streamable HTTP reverse proxy in front of one MCP server
// endpoint. POSTs carry the client's messages (judged before they are
// forwarded); the answers come back as JSON or as an event stream, and GET
// opens the server's own event stream, resumable with Last-Event-ID. Every
// event keeps its id, so resumption works through the proxy. Headers
// (Mcp-Session-Id, MCP-Protocol-Version, Authorization, ...) pass both
// ways.
type HTTPProxy struct {
	Proxy    *Proxy
	Upstream *url.URL
	// Client sends the upstream requests; nil means a client without a
	// timeout (event streams are long-lived).
	Client *http.Client

	mu       sync.Mutex
	sessions map[string]*httpSession
	cors     http.Header // the upstream's last CORS headers

	closing  context.Context // ends at Shutdown
	shutdown context.CancelCauseFunc
}

// errShuttingDown ends the requests in flight at Shutdown.
var errShuttingDown = errors.New("aegis is shutting down")

// Shutdown answers every request waiting on the upstream with a JSON-RPC
// error (and tells the server to cancel it), and ends the event streams
// in flight; call it before shutting the HTTP server down.
func (h *HTTPProxy) Shutdown() {
	h.closingCtx()
	h.shutdown(errShuttingDown)
}

func (h *HTTPProxy) closingCtx() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing == nil {
		h.closing, h.shutdown = context.WithCancelCause(context.Background())
	}
	return h.closing
}

type httpSession struct {
	s    *Session
	seen time.Time
}

// sessionIdle is how long an MCP session unused is remembered, and
// maxSessions how many are; past it a session's requests are judged
// without the state of its earlier ones (duplicate ids across requests go
// unnoticed, answers are judged by their shape).
const (
	sessionIdle = time.Hour
	maxSessions = 4096
)

// session returns the state of the MCP session id. Requests without a
// session id (initialize, or a server without sessions) each get state of
// their own: two clients may both send an initialize with id 0.
func (h *HTTPProxy) session(id string) *Session {
	if id == "" {
		return h.newSession(id)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.Proxy.now()
	if h.sessions == nil {
		h.sessions = map[string]*httpSession{}
	}
	hs, ok := h.sessions[id]
	if !ok {
		for k, o := range h.sessions {
			if now.Sub(o.seen) > sessionIdle && o.s.Pending() == 0 {
				delete(h.sessions, k)
			}
		}
		if len(h.sessions) >= maxSessions { // session ids come from clients: bound what they cost
			return h.newSession(id)
		}
		hs = &httpSession{s: h.newSession(id)}
		h.sessions[id] = hs
	}
	hs.seen = now
	return hs.s
}

// newSession starts the state of one MCP session; its answers to the
// server (a refused sampling or elicitation request) and its
// cancellations are POSTed upstream under the session's id.
func (h *HTTPProxy) newSession(id string) *Session {
	s := h.Proxy.NewSession()
	s.reply = func(b []byte) { h.postUpstream(id, b) }
	return s
}

// postUpstream sends one message to the upstream on its own (an answer
// or a notification), under the session id; the answer is discarded.
func (h *HTTPProxy) postUpstream(session string, msg []byte) {
	req, err := http.NewRequest(http.MethodPost, h.Upstream.String(), bytes.NewReader(msg))
	if err != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := h.client().Do(req)
	if err != nil {
		h.Proxy.Judge.Log.Warn("mcp: sending the server a message", "server", h.Proxy.Server, "err", err.Error())
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
}

func (h *HTTPProxy) dropSession(id string) {
	h.mu.Lock()
	delete(h.sessions, id)
	h.mu.Unlock()
}

// Sessions returns how many MCP sessions the proxy remembers.
func (h *HTTPProxy) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

func (h *HTTPProxy) client() *http.Client {
	if h.Client != nil {
		return h.Client
	}
	return http.DefaultClient
}

// hopHeaders are not forwarded (RFC 9110 §7.6.1), nor are the ones the
// proxy sets itself.
var hopHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Host": true, "Accept-Encoding": true}

func copyHeaders(dst, src http.Header) {
	for k, vs := range src {
		if hopHeaders[http.CanonicalHeaderKey(k)] {
			continue
		}
		for _, v := range vs {
			dst.Add(k, v)
		}
	}
}

func (h *HTTPProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if o := r.Header.Get("Origin"); o != "" && !localOrigin(o) {
		// A web page the user opened must not reach a local MCP server
		// through the browser (DNS rebinding): only local origins pass.
		http.Error(w, "aegis: requests from origin "+o+" are refused", http.StatusForbidden)
		return
	}
	switch r.Method {
	case http.MethodPost:
		h.post(w, r)
	case http.MethodGet:
		h.forward(w, r, nil, h.session(r.Header.Get("Mcp-Session-Id")), nil)
	case http.MethodDelete:
		h.dropSession(r.Header.Get("Mcp-Session-Id"))
		h.forward(w, r, nil, nil, nil)
	default:
		h.forward(w, r, nil, nil, nil)
	}
}

// localOrigin reports whether an Origin header names this machine.
func localOrigin(o string) bool {
	u, err := url.Parse(o)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ownHeaders sets, on an answer Aegis writes itself (a refusal, an
// error), what the server's answers carry for the client: the session id
// and the CORS headers the upstream last sent (or, before any, the
// request's local origin and the session header exposed).
func (h *HTTPProxy) ownHeaders(w http.ResponseWriter, r *http.Request) {
	if sid := r.Header.Get("Mcp-Session-Id"); sid != "" {
		w.Header().Set("Mcp-Session-Id", sid)
	}
	h.mu.Lock()
	cors := h.cors
	h.mu.Unlock()
	if cors != nil {
		copyHeaders(w.Header(), cors)
		return
	}
	if o := r.Header.Get("Origin"); o != "" {
		w.Header().Set("Access-Control-Allow-Origin", o)
		w.Header().Set("Access-Control-Expose-Headers", "Mcp-Session-Id")
	}
}

// rememberCORS keeps the upstream's CORS headers for ownHeaders.
func (h *HTTPProxy) rememberCORS(hd http.Header) {
	var cors http.Header
	for k, v := range hd {
		if strings.HasPrefix(k, "Access-Control-") {
			if cors == nil {
				cors = http.Header{}
			}
			cors[k] = v
		}
	}
	if cors != nil {
		h.mu.Lock()
		h.cors = cors
		h.mu.Unlock()
	}
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(body)
}

func (h *HTTPProxy) post(w http.ResponseWriter, r *http.Request) {
	limit := h.Proxy.Judge.Config.MaxMessageBytes
	body, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, ErrorResponse(nil, jsonrpc.CodeParseError, "aegis: reading the request: "+err.Error(), nil))
		return
	}
	if len(body) > limit {
		writeJSON(w, http.StatusRequestEntityTooLarge, ErrorResponse(nil, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("aegis: message over the limit of %d bytes (max_message_bytes)", limit), nil))
		return
	}
	sess := h.session(r.Header.Get("Mcp-Session-Id"))
	up, back := sess.FromClient(r.Context(), body)
	if up == nil {
		h.ownHeaders(w, r)
		status := http.StatusOK
		if m, err := Decode(body); err != nil || m.Kind != KindRequest || malformed(back) {
			status = http.StatusBadRequest
		}
		writeJSON(w, status, back)
		return
	}
	var wait *json.RawMessage // the id whose answer this POST's response carries
	if m, err := Decode(body); err == nil && m.Kind == KindRequest {
		id := m.ID
		wait = &id
	}
	h.forward(w, r, up, sess, wait)
}

// forward sends r (with body when given) to the upstream and streams the
// answer back, judging every message in it through sess (nil: raw).
// wait is the id of the request the answer is for, if any: when the
// server fails to answer it (an error status, a stream cut before it
// without a resumable event id, the call timeout), the client gets a
// JSON-RPC error for it.
func (h *HTTPProxy) forward(w http.ResponseWriter, r *http.Request, body []byte, sess *Session, wait *json.RawMessage) {
	ctx, stop := context.WithCancelCause(r.Context())
	defer stop(nil)
	defer context.AfterFunc(h.closingCtx(), func() { stop(errShuttingDown) })()
	if wait != nil && h.Proxy.Judge.Config.CallTimeout > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		t := clock.Or(h.Proxy.Clock).NewTimer(h.Proxy.Judge.Config.CallTimeout)
		defer t.Stop()
		go func() {
			select {
			case <-t.C():
				cancel(errCallTimeout)
			case <-ctx.Done():
			}
		}()
	}
	target := *h.Upstream
	if r.URL.RawQuery != "" {
		target.RawQuery = r.URL.RawQuery
	}
	var rb io.Reader
	if body != nil {
		rb = bytes.NewReader(body)
	} else if r.Body != nil && r.Method != http.MethodGet {
		// Streamed on: full duplex keeps the body open should the
		// server answer before it has read it all (an HTTP/1 server
		// would otherwise close it under the transport).
		http.NewResponseController(w).EnableFullDuplex()
		rb = r.Body
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, target.String(), rb)
	if err != nil {
		h.failed(w, sess, wait, http.StatusBadGateway, causeOf(ctx, err))
		return
	}
	copyHeaders(req.Header, r.Header)
	if body != nil {
		req.ContentLength = int64(len(body))
	}
	resp, err := h.client().Do(req)
	if err != nil {
		h.failed(w, sess, wait, http.StatusBadGateway, causeOf(ctx, err))
		return
	}
	defer resp.Body.Close()
	h.rememberCORS(resp.Header)
	copyHeaders(w.Header(), resp.Header)
	ct := resp.Header.Get("Content-Type")
	switch {
	case sess != nil && resp.StatusCode == http.StatusOK && strings.HasPrefix(ct, "text/event-stream"):
		w.WriteHeader(resp.StatusCode)
		h.stream(ctx, w, resp.Body, sess, wait)
	case sess != nil && resp.StatusCode == http.StatusOK && strings.HasPrefix(ct, "application/json"):
		max := int64(h.Proxy.Judge.Config.MaxResultBytes + h.Proxy.Judge.Config.MaxMessageBytes)
		b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
		if err != nil || int64(len(b)) > max {
			if err == nil {
				err = fmt.Errorf("the answer is over %d bytes", max)
			}
			w.Header().Del("Content-Type")
			h.failed(w, sess, wait, http.StatusBadGateway, causeOf(ctx, err))
			return
		}
		out := sess.FromServer(ctx, b)
		if out == nil {
			out = ErrorResponse(idOrNil(wait), CodeServerGone, "aegis: the server's answer was not a JSON-RPC message", nil)
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(out)
	default:
		if wait != nil && sess != nil && resp.StatusCode >= 400 {
			sess.forget(string(*wait))
		}
		w.WriteHeader(resp.StatusCode)
		copyFlushing(w, resp.Body)
	}
}

// malformed reports whether answer is Aegis's JSON-RPC error for a
// message it could not read (a parse error or an invalid request, such as
// invalid UTF-8), not a refusal.
func malformed(answer []byte) bool {
	var e struct {
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal(answer, &e) == nil && e.Error != nil &&
		(e.Error.Code == jsonrpc.CodeParseError || e.Error.Code == jsonrpc.CodeInvalidRequest)
}

// causeOf is err, or errCallTimeout or errShuttingDown when that is why
// ctx ended.
func causeOf(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c == errCallTimeout || c == errShuttingDown {
		return c
	}
	return err
}

// errCallTimeout ends an upstream request past call_timeout.
var errCallTimeout = errors.New("call_timeout")

func idOrNil(id *json.RawMessage) json.RawMessage {
	if id == nil {
		return nil
	}
	return *id
}

// failed answers a request the upstream could not take: a JSON-RPC error
// for the request's id, or a bare status.
func (h *HTTPProxy) failed(w http.ResponseWriter, sess *Session, wait *json.RawMessage, status int, err error) {
	h.Proxy.Judge.Log.Warn("mcp: upstream request failed", "server", h.Proxy.Server, "err", err.Error())
	if wait == nil {
		http.Error(w, "aegis: the MCP server did not answer: "+err.Error(), status)
		return
	}
	code, msg := h.failure(err, sess, *wait)
	if errors.Is(err, errShuttingDown) {
		status = http.StatusServiceUnavailable
	}
	h.answerFailed(sess, *wait)
	writeJSON(w, status, ErrorResponse(*wait, code, msg, nil))
}

// failure is the JSON-RPC error code and message for a request the
// upstream did not answer because of err; when Aegis gave up on it (a
// timeout, a shutdown) the server is told to cancel it.
func (h *HTTPProxy) failure(err error, sess *Session, id json.RawMessage) (int, string) {
	var code int
	var msg, reason string
	switch {
	case errors.Is(err, errCallTimeout):
		code, msg, reason = CodeTimeout, fmt.Sprintf("aegis: the server did not answer within %s (call_timeout)", h.Proxy.Judge.Config.CallTimeout), "timed out in Aegis"
	case errors.Is(err, errShuttingDown):
		code, msg, reason = CodeServerGone, "aegis: shutting down: the call was not answered", "Aegis is shutting down"
	default:
		return CodeServerGone, "aegis: the MCP server did not answer: " + err.Error()
	}
	if sess != nil && sess.reply != nil { // tell the server to stop working on it
		sess.reply(Notification("notifications/cancelled", map[string]any{"requestId": id, "reason": reason}))
	}
	return code, msg
}

func (h *HTTPProxy) answerFailed(sess *Session, id json.RawMessage) {
	if sess == nil {
		return
	}
	key := string(bytes.TrimSpace(id))
	sess.mu.Lock()
	c := sess.pending[key]
	delete(sess.pending, key)
	sess.mu.Unlock()
	if c != nil && c.reqID != "" {
		h.Proxy.finish(c, nil, "halted", OutcomeServerGone, h.Proxy.now())
	}
}

func copyFlushing(w http.ResponseWriter, r io.Reader) {
	f, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// stream copies an event stream, judging the message in every event's
// data and keeping every other field (id, event, retry, comments) as it
// came.
func (h *HTTPProxy) stream(ctx context.Context, w http.ResponseWriter, body io.Reader, sess *Session, wait *json.RawMessage) {
	f, _ := w.(http.Flusher)
	flush := func() {
		if f != nil {
			f.Flush()
		}
	}
	flush()
	limit := h.Proxy.Judge.Config.MaxResultBytes + h.Proxy.Judge.Config.MaxMessageBytes
	br := bufio.NewReaderSize(body, 64<<10)
	var other []byte // the event's lines other than data, as they came
	var data, rawData []byte
	hasData, resumable, answered := false, false, false
	waitKey := ""
	if wait != nil {
		waitKey = string(bytes.TrimSpace(*wait))
	}
	var line []byte
	for {
		var err error
		line, err = readSSELine(br, line[:0], limit)
		if err != nil {
			break
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		if len(trimmed) == 0 { // the end of an event
			if hasData {
				msg := sess.FromServer(ctx, data)
				if waitKey != "" && msg != nil && respondsTo(msg, waitKey) {
					answered = true
				}
				w.Write(other)
				switch {
				case msg == nil:
				case bytes.Equal(msg, data):
					w.Write(rawData)
				default:
					w.Write([]byte("data: "))
					w.Write(msg)
					w.Write([]byte("\n"))
				}
				w.Write([]byte("\n"))
			} else if len(other) > 0 {
				w.Write(other)
				w.Write([]byte("\n"))
			}
			flush()
			other, data, rawData, hasData = other[:0], data[:0], rawData[:0], false
			continue
		}
		field, value, _ := bytes.Cut(trimmed, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data = append(data, '\n')
			}
			data = append(data, value...)
			rawData = append(rawData, line...)
			hasData = true
		case "id":
			if len(value) > 0 {
				resumable = true
			}
			other = append(other, line...)
		default:
			other = append(other, line...)
		}
	}
	cause := causeOf(ctx, nil)
	if waitKey != "" && !answered && (!resumable || cause != nil) && sess.hasPending(waitKey) {
		// The stream ended without the answer and cannot be resumed, or
		// Aegis gave up on the call (call_timeout, a shutdown).
		code, msg := CodeServerGone, "aegis: the MCP server closed the stream before answering"
		if cause != nil {
			code, msg = h.failure(cause, sess, *wait)
		}
		h.answerFailed(sess, *wait)
		w.Write([]byte("event: message\ndata: "))
		w.Write(ErrorResponse(*wait, code, msg, nil))
		w.Write([]byte("\n\n"))
		flush()
	}
}

func (s *Session) hasPending(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pending[key]
	return ok
}

// respondsTo reports whether msg is the response to the request key.
func respondsTo(msg []byte, key string) bool {
	m, err := Decode(msg)
	return err == nil && m.Kind == KindResponse && m.IDKey() == key
}

var errSSELine = errors.New("event stream line over the size limit")

// readSSELine reads one line with its line end into buf.
func readSSELine(br *bufio.Reader, buf []byte, limit int) ([]byte, error) {
	for {
		frag, err := br.ReadSlice('\n')
		buf = append(buf, frag...)
		if len(buf) > limit {
			return buf, errSSELine
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if len(buf) > 0 && errors.Is(err, io.EOF) {
				return append(buf, '\n'), nil
			}
			return buf, err
		}
		return buf, nil
	}
}

package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// passKind is how the gateway treats an endpoint it does not generate on.
type passKind int

const (
	passUnknown    passKind = iota // not served: 404
	passReadOnly                   // model information: forwarded as is
	passEmbeddings                 // forwarded after the input checks
	passManagement                 // changes the upstream's models: refused unless allowed
)

func (k passKind) String() string {
	switch k {
	case passReadOnly:
		return "read-only"
	case passEmbeddings:
		return "embeddings"
	case passManagement:
		return "management"
	}
	return "unknown"
}

// ollamaEndpoints classifies Ollama's other endpoints.
var ollamaEndpoints = map[string]passKind{
	"/api/tags":       passReadOnly,
	"/api/show":       passReadOnly,
	"/api/ps":         passReadOnly,
	"/api/version":    passReadOnly,
	"/api/embed":      passEmbeddings,
	"/api/embeddings": passEmbeddings,
	"/api/pull":       passManagement,
	"/api/push":       passManagement,
	"/api/copy":       passManagement,
	"/api/delete":     passManagement,
	"/api/create":     passManagement,
	"/api/blobs":      passManagement,
}

func ollamaEndpoint(path string) passKind {
	if k, ok := ollamaEndpoints[path]; ok {
		return k
	}
	if strings.HasPrefix(path, "/api/blobs/") {
		return passManagement
	}
	return passUnknown
}

// serveOllamaPassthrough serves Ollama's endpoints other than chat and
// generate, by policy: model information passes, embeddings pass after
// the input checks, and model management (pull, push, copy, delete,
// create, blobs) is refused unless AllowManagement is set. Errors use
// Ollama's error shape.
func (g *Gateway) serveOllamaPassthrough(w http.ResponseWriter, r *http.Request) {
	kind := ollamaEndpoint(r.URL.Path)
	var up *upstream.Upstream
	for _, u := range g.Upstreams {
		if u.Kind == upstream.KindOllama {
			up = u
			break
		}
	}
	switch {
	case kind == passUnknown:
		fail(w, r.URL.Path, http.StatusNotFound, apiError{Message: "no such endpoint: " + r.URL.Path, Code: "not_found"})
		return
	case up == nil:
		fail(w, r.URL.Path, http.StatusNotFound, apiError{Message: r.URL.Path + " is served only in front of an Ollama upstream", Code: "not_found"})
		return
	case kind == passManagement && !g.AllowManagement:
		markFinal(w.Header())
		fail(w, r.URL.Path, http.StatusForbidden, apiError{Message: r.URL.Path + " changes the upstream's models and is refused here (the gateway's config can allow it)", Code: "management_refused"})
		return
	case kind == passEmbeddings:
		if !g.checkEmbeddingInput(w, r) {
			return
		}
	}
	g.proxy(w, r, up)
}

// serveEmbeddings serves POST /v1/embeddings: the input checks, then the
// upstream that serves the model.
func (g *Gateway) serveEmbeddings(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, apiError{Message: r.URL.Path + " takes POST", Type: "invalid_request_error", Code: "method_not_allowed"}, nil)
		return
	}
	raw, status, err := g.readBody(w, r)
	if err != nil {
		writeError(w, status, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request"}, nil)
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		writeError(w, http.StatusBadRequest, apiError{Message: "request body is not a JSON object: " + err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request"}, nil)
		return
	}
	up, err := g.route(req.Model)
	if err != nil || up == nil {
		p := "model"
		writeError(w, http.StatusNotFound, apiError{Message: "model " + quote(req.Model) + " is not served here", Type: "invalid_request_error", Code: "model_not_found", Param: &p}, nil)
		return
	}
	r.Body, r.ContentLength = readerBody(raw), int64(len(raw))
	if !g.checkEmbeddingInput(w, r) {
		return
	}
	g.proxy(w, r, up)
}

// checkEmbeddingInput runs the input checks over an embeddings request's
// texts (OpenAI's and Ollama's "input", Ollama's older "prompt"). It
// answers the request itself and reports false when the input is
// refused or unreadable; else it leaves r.Body ready to forward.
func (g *Gateway) checkEmbeddingInput(w http.ResponseWriter, r *http.Request) bool {
	raw, status, err := g.readBody(w, r)
	if err != nil {
		fail(w, r.URL.Path, status, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request"})
		return false
	}
	r.Body, r.ContentLength = readerBody(raw), int64(len(raw))
	if g.InputCheck == nil {
		return true
	}
	var req struct {
		Model  string          `json:"model"`
		Input  json.RawMessage `json:"input"`
		Prompt string          `json:"prompt"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		fail(w, r.URL.Path, http.StatusBadRequest, apiError{Message: "request body is not a JSON object: " + err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request"})
		return false
	}
	texts := []string{}
	if req.Prompt != "" {
		texts = append(texts, req.Prompt)
	}
	var one string
	var many []string
	if json.Unmarshal(req.Input, &one) == nil && one != "" {
		texts = append(texts, one)
	} else if json.Unmarshal(req.Input, &many) == nil {
		texts = append(texts, many...)
	}
	vreq := &validator.Request{}
	for _, t := range texts {
		vreq.Messages = append(vreq.Messages, validator.Message{Role: "user", Content: t})
	}
	if len(vreq.Messages) == 0 {
		return true
	}
	v := g.InputCheck(r.Context(), vreq)
	if v == nil || v.Verdict != validator.Fail || v.Action != validator.ActionBlock {
		return true
	}
	id, start := newRequestID(), g.now()
	v.ID = id
	if v.Findings == nil {
		v.Findings = []validator.Finding{}
	}
	m := &meta{Verdict: *v, RequestID: id}
	g.Events.Publish(events.Event{Kind: events.RequestStarted, Time: start, RequestID: id, Route: r.URL.Path, Model: req.Model})
	g.publish(events.Event{Kind: events.Halt, RequestID: id, Route: r.URL.Path, Model: req.Model, Verdict: &m.Verdict}, g.policy().LogText)
	markFinal(w.Header())
	w.Header().Set(HeaderRequestID, id)
	status = HaltStatus(v.Reason, v.Action)
	msg := haltMessage(*v)
	if strings.HasPrefix(r.URL.Path, "/api/") {
		setVerdictHeaders(w.Header(), m)
		writeJSON(w, status, map[string]any{"error": ErrorCode(v.Reason) + ": " + msg, "aegis": m})
	} else {
		writeError(w, status, apiError{Message: msg, Type: errorType(v.Reason, v.Action), Code: ErrorCode(v.Reason)}, m)
	}
	g.Events.Publish(events.Event{Kind: events.RequestFinished, RequestID: id, Route: r.URL.Path, Model: req.Model,
		Outcome: events.OutcomeBlocked, Status: status, Duration: g.now().Sub(start)})
	return false
}

func readerBody(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

// scrub replaces every upstream's address in a message meant for a client
// with the upstream's name: error texts from the network name the URL.
func (g *Gateway) scrub(msg string) string {
	for _, u := range g.Upstreams {
		if u.URL == nil {
			continue
		}
		name := "upstream " + u.Name
		msg = strings.ReplaceAll(msg, u.URL.String(), name)
		msg = strings.ReplaceAll(msg, u.URL.Host, name)
		if h := u.URL.Hostname(); h != "" && h != "localhost" {
			msg = strings.ReplaceAll(msg, h, name)
		}
	}
	return msg
}

// scrubFindings returns findings whose messages name no upstream address
// (never nil, so the JSON says []).
func (g *Gateway) scrubFindings(fs []validator.Finding) []validator.Finding {
	out := make([]validator.Finding, len(fs))
	for i, f := range fs {
		f.Message = g.scrub(f.Message)
		out[i] = f
	}
	return out
}

// loadUnload forwards Ollama's load and unload idiom, POST /api/chat with
// no messages (keep_alive 0 unloads), which generates nothing to check.
// It reports whether it answered the request.
func (g *Gateway) loadUnload(w http.ResponseWriter, r *http.Request, route dialect, body rawBody, raw []byte) bool {
	if route.generates(body) {
		return false
	}
	var req struct {
		Model string `json:"model"`
	}
	json.Unmarshal(raw, &req)
	up, err := g.route(req.Model)
	if err != nil || up == nil || up.Kind != upstream.KindOllama {
		return false // the usual errors follow
	}
	r.Body, r.ContentLength = readerBody(raw), int64(len(raw))
	g.proxy(w, r, up)
	return true
}

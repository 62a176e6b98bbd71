package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// serveModels lists the models of every upstream: the configured names,
// or what the upstream's own /v1/models says.
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, apiError{Message: "use GET", Type: "invalid_request_error", Code: "method_not_allowed"}, nil)
		return
	}
	data, err := g.modelList(r.Context())
	if err != nil {
		unreachable(w, g.scrub(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Object string            `json:"object"`
		Data   []json.RawMessage `json:"data"`
	}{Object: "list", Data: data})
}

// unreachable answers 502 when no upstream could say which models it has.
func unreachable(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusBadGateway, apiError{Message: msg, Type: "aegis_unavailable", Code: "aegis_upstream_error"}, nil)
}

// serveModel answers GET /v1/models/{id} with the model object from the
// list, or 404 model_not_found.
func (g *Gateway) serveModel(w http.ResponseWriter, r *http.Request, id string) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, apiError{Message: "use GET", Type: "invalid_request_error", Code: "method_not_allowed"}, nil)
		return
	}
	list, err := g.modelList(r.Context())
	if err != nil {
		unreachable(w, g.scrub(err.Error()))
		return
	}
	for _, m := range list {
		var o struct {
			ID string `json:"id"`
		}
		// Ollama lists "name:latest" for a model its clients call "name".
		if json.Unmarshal(m, &o) == nil && (o.ID == id || o.ID == id+":latest") {
			writeJSON(w, http.StatusOK, m)
			return
		}
	}
	p := "model"
	writeError(w, http.StatusNotFound, apiError{Message: "model " + quote(id) + " is not served here", Type: "invalid_request_error", Code: "model_not_found", Param: &p}, nil)
}

// serveUnsupported answers the OpenAI endpoints Aegis does not serve.
func (g *Gateway) serveUnsupported(w http.ResponseWriter, r *http.Request) {
	msg, code := "no such endpoint: "+r.URL.Path+"; Aegis serves "+servedEndpoints, "not_found"
	if strings.HasPrefix(r.URL.Path, "/v1/responses/") {
		msg, code = "stored responses are not served: Aegis checks POST /v1/responses as it is generated and keeps no responses", "unsupported_endpoint"
	}
	markFinal(w.Header())
	fail(w, r.URL.Path, http.StatusNotFound, apiError{Message: msg, Type: "invalid_request_error", Code: code})
}

// servedEndpoints lists the OpenAI-style endpoints, for the error of one
// that is not.
const servedEndpoints = "/v1/chat/completions, /v1/completions, /v1/messages, /v1/messages/count_tokens, /v1/responses, /v1/embeddings and /v1/models"

// serveCountTokens forwards POST /v1/messages/count_tokens to the
// upstream that serves the model: it generates nothing to check. An
// Ollama upstream, which lacks the Messages API, gets the error that
// says so.
func (g *Gateway) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(w, r.URL.Path, http.StatusMethodNotAllowed, apiError{Message: r.URL.Path + " takes POST", Type: "invalid_request_error", Code: "method_not_allowed"})
		return
	}
	raw, status, err := g.readBody(w, r)
	if err != nil {
		fail(w, r.URL.Path, status, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request"})
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		fail(w, r.URL.Path, http.StatusBadRequest, apiError{Message: "request body is not a JSON object: " + err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request"})
		return
	}
	up, err := g.route(req.Model)
	if err != nil || up == nil {
		fail(w, r.URL.Path, http.StatusNotFound, apiError{Message: "model " + quote(req.Model) + " is not served here", Type: "invalid_request_error", Code: "model_not_found"})
		return
	}
	if _, err := dialectMessages.upstreamPath(up.Kind); err != nil {
		fail(w, r.URL.Path, http.StatusNotFound, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "not_found"})
		return
	}
	r.Body, r.ContentLength = readerBody(raw), int64(len(raw))
	g.proxy(w, r, up)
}

// modelList returns the model objects of every upstream: the configured
// names, or what the upstream's own /v1/models says. It fails when no
// upstream could be asked (all of them down), rather than listing none.
func (g *Gateway) modelList(ctx context.Context) ([]json.RawMessage, error) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	data := []json.RawMessage{}
	var errs []error
	answered := false
	for _, u := range g.Upstreams {
		if len(u.Models) > 0 {
			for _, m := range u.Models {
				b, _ := json.Marshal(model{ID: m, Object: "model", Created: time.Now().Unix(), OwnedBy: u.Name})
				data = append(data, b)
			}
			answered = true
			continue
		}
		code, body, err := u.Get(ctx, "/v1/models")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		answered = true
		if code != http.StatusOK {
			continue
		}
		var list struct {
			Data []json.RawMessage `json:"data"`
		}
		if json.Unmarshal(body, &list) == nil {
			data = append(data, list.Data...)
		}
	}
	if !answered && len(errs) > 0 {
		msgs := make([]string, len(errs))
		for i, e := range errs {
			msgs[i] = e.Error()
		}
		return nil, fmt.Errorf("no upstream could list its models: %s", strings.Join(msgs, "; "))
	}
	return data, nil
}

// serveHealth reports Aegis's own health and each upstream's: 200 when
// at least one upstream is healthy, else 503.
func (g *Gateway) serveHealth(w http.ResponseWriter, r *http.Request) {
	type st struct {
		Name  string `json:"name"`
		Kind  string `json:"kind"`
		OK    bool   `json:"ok"`
		Error string `json:"error,omitempty"`
	}
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	var ups []st
	ok := false
	for _, u := range g.Upstreams {
		s := st{Name: u.Name, Kind: u.Kind.String(), OK: true}
		if err := u.Health(ctx); err != nil {
			s.OK, s.Error = false, g.scrub(err.Error())
		} else {
			ok = true
		}
		ups = append(ups, s)
	}
	status, word := http.StatusOK, "ok"
	if !ok {
		status, word = http.StatusServiceUnavailable, "degraded"
	}
	writeJSON(w, status, map[string]any{"status": word, "upstreams": ups})
}

package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httputil"
	"time"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// serveModels lists the models of every upstream: the configured names,
// or what the upstream's own /v1/models says.
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, apiError{Message: "use GET", Type: "invalid_request_error", Code: "method_not_allowed"}, nil)
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	out := struct {
		Object string            `json:"object"`
		Data   []json.RawMessage `json:"data"`
	}{Object: "list", Data: []json.RawMessage{}}
	for _, u := range g.Upstreams {
		if len(u.Models) > 0 {
			for _, m := range u.Models {
				b, _ := json.Marshal(model{ID: m, Object: "model", Created: time.Now().Unix(), OwnedBy: u.Name})
				out.Data = append(out.Data, b)
			}
			continue
		}
		code, body, err := u.Get(r.Context(), "/v1/models")
		if err != nil || code != http.StatusOK {
			continue
		}
		var list struct {
			Data []json.RawMessage `json:"data"`
		}
		if json.Unmarshal(body, &list) == nil {
			out.Data = append(out.Data, list.Data...)
		}
	}
	writeJSON(w, http.StatusOK, out)
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
			s.OK, s.Error = false, err.Error()
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

// serveOllamaPassthrough forwards Ollama's other endpoints (/api/tags,
// /api/version, /api/show, ...) unchanged, so Ollama clients work through
// Aegis. Only the generating endpoints are checked.
func (g *Gateway) serveOllamaPassthrough(w http.ResponseWriter, r *http.Request) {
	var up *upstream.Upstream
	for _, u := range g.Upstreams {
		if u.Kind == upstream.KindOllama {
			up = u
			break
		}
	}
	if up == nil {
		writeError(w, http.StatusNotFound, apiError{Message: "no Ollama upstream for " + r.URL.Path, Type: "invalid_request_error", Code: "not_found"}, nil)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, g.maxBody())
	rp := &httputil.ReverseProxy{
		Rewrite:   func(pr *httputil.ProxyRequest) { pr.SetURL(up.URL); pr.Out.Header.Del("Authorization") },
		Transport: up.Client.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": "upstream: " + err.Error()})
		},
	}
	rp.ServeHTTP(w, r)
}

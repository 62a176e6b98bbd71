package gateway

import (
	"net/http"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/auth"
)

// dialects lists every dialect (tests range over it).
var dialects = []dialect{dialectChat, dialectCompletions, dialectOllamaChat, dialectOllamaGenerate, dialectMessages, dialectResponses}

// ServeHTTP routes the API.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.ensureKinds(r.Context())
	if r.URL.Path == "/health" || r.URL.Path == "/v1/health" {
		g.serveHealth(w, r)
		return
	}
	if r.URL.Path == "/" {
		g.serveRoot(w, r)
		return
	}
	if g.AuthToken != "" && !g.authorized(r) {
		fail(w, r.URL.Path, http.StatusUnauthorized, apiError{Message: "missing or wrong bearer token", Type: "authentication_error", Code: "invalid_api_key"})
		return
	}
	switch r.URL.Path {
	case "/v1/chat/completions", "/chat/completions":
		g.serveGenerate(w, r, dialectChat)
	case "/v1/completions", "/completions":
		g.serveGenerate(w, r, dialectCompletions)
	case "/api/chat":
		g.serveGenerate(w, r, dialectOllamaChat)
	case "/api/generate":
		g.serveGenerate(w, r, dialectOllamaGenerate)
	case "/v1/messages":
		g.serveGenerate(w, r, dialectMessages)
	case "/v1/messages/count_tokens":
		g.serveCountTokens(w, r)
	case "/v1/responses":
		g.serveGenerate(w, r, dialectResponses)
	case "/v1/models", "/models":
		g.serveModels(w, r)
	case "/v1/embeddings", "/embeddings":
		g.serveEmbeddings(w, r)
	default:
		if id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/"); ok && id != "" {
			g.serveModel(w, r, id)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/v1/") {
			g.serveUnsupported(w, r)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/api/") {
			g.serveOllamaPassthrough(w, r)
			return
		}
		writeError(w, http.StatusNotFound, apiError{Message: "no such endpoint: " + r.URL.Path, Type: "invalid_request_error", Code: "not_found"}, nil)
	}
}

func (g *Gateway) authorized(r *http.Request) bool {
	return auth.BearerOK(r.Header.Get("Authorization"), g.AuthToken)
}

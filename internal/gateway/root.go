package gateway

import (
	"net/http"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// serveRoot answers GET and HEAD / the way the upstream kind does, since
// clients use it as a heartbeat: the Ollama CLI sends HEAD / before every
// command and gives up unless it gets 200. In front of Ollama the body is
// Ollama's own "Ollama is running"; otherwise a short plain-text line.
// It needs no bearer token and says nothing about the upstreams.
func (g *Gateway) serveRoot(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, apiError{Message: "use GET or HEAD", Type: "invalid_request_error", Code: "method_not_allowed"}, nil)
		return
	}
	body := "Aegis is running"
	for _, u := range g.Upstreams {
		if u.Kind == upstream.KindOllama {
			body = "Ollama is running"
			break
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Content-Length", itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		w.Write([]byte(body))
	}
}

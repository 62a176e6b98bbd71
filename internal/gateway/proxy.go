package gateway

import (
	"net/http"
	"net/http/httputil"

	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// proxy forwards r to up unchanged but for the client's bearer token,
// which is Aegis's, not the upstream's. Errors name the upstream, never
// its address.
func (g *Gateway) proxy(w http.ResponseWriter, r *http.Request, up *upstream.Upstream) {
	// An upstream may answer before it has read the whole body (Ollama's
	// pull streams its progress at once). Writing the answer's header
	// makes an HTTP/1 server drain and close a request body still being
	// read, and the transport sending that body upstream would then fail
	// and drop the upstream's connection mid-answer. Full duplex keeps the
	// body open while the answer is written (HTTP/2 always does; every
	// writer this package serves with supports it, which
	// TestPassthroughAnswerBeforeBody holds).
	http.NewResponseController(w).EnableFullDuplex()
	r.Body = http.MaxBytesReader(w, r.Body, g.maxBody())
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up.URL)
			pr.Out.Header.Del("Authorization")
			if up.APIKey != "" {
				pr.Out.Header.Set("Authorization", "Bearer "+up.APIKey)
			}
		},
		Transport: up.Client.Transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.logf("upstream %s: %s %s: %v", up.Name, r.Method, r.URL.Path, err)
			fail(w, r.URL.Path, http.StatusBadGateway, apiError{Message: "upstream " + up.Name + " could not be reached", Type: "aegis_unavailable", Code: ErrorCode(validator.ReasonUpstreamError)})
		},
	}
	rp.ServeHTTP(w, r)
}

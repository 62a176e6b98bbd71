package gateway

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// serveGenerate handles the four generating routes: decode and check the
// request, pick the upstream, run attempts until one is released or the
// request halts.
func (g *Gateway) serveGenerate(w http.ResponseWriter, r *http.Request, route dialect) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(w, r.URL.Path, http.StatusMethodNotAllowed, apiError{Message: route.String() + " takes POST", Type: "invalid_request_error", Code: "method_not_allowed"})
		return
	}
	if !g.acquireStream() {
		busy(w, r.URL.Path, cap(g.streams))
		return
	}
	defer g.releaseStream()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	r = r.WithContext(ctx)
	x := &exchange{g: g, w: w, r: r, route: route, id: newRequestID(), start: g.now(), cancel: cancel}
	x.req.logText = g.policy().LogText
	w.Header().Set(HeaderRequestID, x.id)

	raw, status, err := g.readBody(w, r)
	if err != nil {
		x.reject(status, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request"})
		return
	}
	// Splitting the body into members validates it.
	var exact bool
	if x.req.body, exact, err = splitRequest(raw); err != nil || x.req.body == nil {
		x.reject(http.StatusBadRequest, apiError{Message: "request body is not a JSON object: " + errText(err), Type: "invalid_request_error", Code: "aegis_bad_request"})
		return
	}
	if exact {
		x.req.raw = raw
	}
	if g.loadUnload(w, r, route, x.req.body, raw) {
		return
	}
	if err := x.decode(raw); err != nil {
		x.reject(http.StatusBadRequest, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request"})
		return
	}
	up, err := g.route(x.req.model)
	if err != nil {
		x.reject(http.StatusBadGateway, apiError{Message: err.Error(), Type: "aegis_unavailable", Code: ErrorCode(validator.ReasonUpstreamError)})
		return
	}
	if up == nil {
		p := "model"
		x.reject(http.StatusNotFound, apiError{Message: fmt.Sprintf("model %q is not served here", x.req.model), Type: "invalid_request_error", Code: "model_not_found", Param: &p})
		return
	}
	x.up = up
	if _, err := route.upstreamPath(up.Kind); err != nil {
		x.reject(http.StatusNotFound, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "not_found"})
		return
	}
	x.publish(events.Event{Kind: events.RequestStarted, Time: x.start, RequestID: x.id, Route: route.String(), Upstream: up.Name, Model: x.req.model, Stream: x.req.stream})

	if g.InputCheck != nil {
		if v := g.InputCheck(r.Context(), x.req.vreq); v != nil && v.Verdict == validator.Fail && v.Action == validator.ActionBlock {
			x.halt(*v)
			return
		} else if v != nil && v.Verdict == validator.Pass {
			x.redactToolResults(v.Findings) // tool results the policy redacts rather than blocks
		}
	}
	n, err := x.route.choices(x.req.body)
	if err != nil {
		p := "n"
		x.reject(http.StatusBadRequest, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request", Param: &p})
		return
	}
	if n > 1 && x.req.stream {
		x.runChoicesStream(n)
		return
	}
	if n > 1 {
		x.runChoices(n)
		return
	}
	defer x.out.recycle()
	x.run()
}

// decode reads the fields the gateway interprets into x.
func (x *exchange) decode(raw []byte) error {
	req, err := x.route.decode(raw, x.req.body)
	if err != nil {
		return err
	}
	x.req.model, x.req.vreq, x.req.stream = req.model, req.vreq, req.stream
	return nil
}

func errText(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}

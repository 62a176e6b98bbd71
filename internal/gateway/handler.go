package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/upstream"
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
	x.logText = g.policy().LogText
	w.Header().Set(HeaderRequestID, x.id)

	raw, status, err := g.readBody(w, r)
	if err != nil {
		x.reject(status, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request"})
		return
	}
	// Splitting the body into members validates it.
	if x.body, err = splitBody(raw); err != nil || x.body == nil {
		x.reject(http.StatusBadRequest, apiError{Message: "request body is not a JSON object: " + errText(err), Type: "invalid_request_error", Code: "aegis_bad_request"})
		return
	}
	if x.loadUnload(raw) {
		return
	}
	if err := x.decode(raw); err != nil {
		x.reject(http.StatusBadRequest, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request"})
		return
	}
	up, err := g.route(x.model)
	if err != nil {
		x.reject(http.StatusBadGateway, apiError{Message: err.Error(), Type: "aegis_unavailable", Code: ErrorCode(validator.ReasonUpstreamError)})
		return
	}
	if up == nil {
		p := "model"
		x.reject(http.StatusNotFound, apiError{Message: fmt.Sprintf("model %q is not served here", x.model), Type: "invalid_request_error", Code: "model_not_found", Param: &p})
		return
	}
	x.up = up
	if _, err := route.upstreamPath(up.Kind); err != nil {
		x.reject(http.StatusNotFound, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "not_found"})
		return
	}
	g.Events.Publish(events.Event{Kind: events.RequestStarted, Time: x.start, RequestID: x.id, Route: route.String(), Upstream: up.Name, Model: x.model, Stream: x.stream})

	if g.InputCheck != nil {
		if v := g.InputCheck(r.Context(), x.vreq); v != nil && v.Verdict == validator.Fail && v.Action == validator.ActionBlock {
			x.attempts = 0
			x.halt(*v)
			return
		}
	}
	n, err := x.route.choices(x.body)
	if err != nil {
		p := "n"
		x.reject(http.StatusBadRequest, apiError{Message: err.Error(), Type: "invalid_request_error", Code: "aegis_bad_request", Param: &p})
		return
	}
	if n > 1 && x.stream {
		x.runChoicesStream(n)
		return
	}
	if n > 1 {
		x.runChoices(n)
		return
	}
	defer x.recycle()
	x.run()
}

// decode reads the fields the gateway interprets into x.
func (x *exchange) decode(raw []byte) error {
	req, err := x.route.decode(raw, x.body)
	if err != nil {
		return err
	}
	x.model, x.vreq, x.stream = req.model, req.vreq, req.stream
	return nil
}

// reject answers a request that never reached an upstream.
func (x *exchange) reject(status int, e apiError) {
	x.writeError(status, e, nil, false)
	x.publish(events.Event{Kind: events.RequestFinished, RequestID: x.id, Route: x.route.String(), Model: x.model,
		Outcome: events.OutcomeRejected, Status: status, Duration: x.g.now().Sub(x.start), Error: e.Message})
}

func errText(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}

// exchange is the state of one client request across its attempts.
type exchange struct {
	g       *Gateway
	w       http.ResponseWriter
	r       *http.Request
	route   dialect
	id      string
	start   time.Time
	body    rawBody
	vreq    *validator.Request
	model   string
	stream  bool
	up      *upstream.Upstream
	logText bool
	cancel  context.CancelFunc // ends the request (the client stopped reading)

	// notes are findings the gateway adds to the verdict without changing
	// it (invalid UTF-8 it replaced); utf8Noted says that one was added.
	notes     []validator.Finding
	utf8Noted bool

	attempts     int
	stallRetried bool
	repaired     bool
	optimistic   bool
	capped       bool // the response passed MaxResponseBytes

	releaser               // the output, what was sent of it and what waits
	step     pipeline.Step // the attempt's step after the last feed
	tpl      template

	tools toolAcc
	acc   fieldAcc // a non-streaming answer's other fields (rebuild.go)
	// result, when set, makes this the exchange of one of several
	// choices (choices.go): its end is recorded there, not published.
	result   *subResult
	olTools  []json.RawMessage
	heldTool [][]byte
	tail     [][]byte
	finish   string

	firstUp time.Time
	lastUp  time.Time // the last upstream chunk read

	tokens  []tokenSpan // the current attempt's text chunks (budget.go)
	carried int         // released tokens of earlier attempts

	scratch *scratch // where the reusable buffers came from (recycle)
}

package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/openai"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// serveGenerate handles the four generating routes: decode and check the
// request, pick the upstream, run attempts until one is released or the
// request halts.
func (g *Gateway) serveGenerate(w http.ResponseWriter, r *http.Request, route routeKind) {
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
	if err := json.Unmarshal(raw, &x.body); err != nil || x.body == nil {
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
	n, err := x.choices()
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

// decode reads the fields the gateway interprets into x, for each route.
func (x *exchange) decode(raw []byte) error {
	switch x.route {
	case routeChat, routeOllamaChat:
		var cr openai.ChatRequest
		if err := json.Unmarshal(raw, &cr); err != nil {
			return fmt.Errorf("invalid chat request: %w", err)
		}
		if len(cr.Messages) == 0 {
			return fmt.Errorf("messages must not be empty")
		}
		x.model = cr.Model
		x.vreq = cr.ValidatorRequest()
		if x.route == routeChat {
			x.stream = cr.Stream
		}
	case routeCompletions, routeOllamaGenerate:
		var cr struct {
			Model     string          `json:"model"`
			Prompt    json.RawMessage `json:"prompt"`
			System    string          `json:"system"`
			Stream    bool            `json:"stream"`
			MaxTokens *int            `json:"max_tokens"`
		}
		if err := json.Unmarshal(raw, &cr); err != nil {
			return fmt.Errorf("invalid completion request: %w", err)
		}
		var prompt string
		if len(cr.Prompt) > 0 && json.Unmarshal(cr.Prompt, &prompt) != nil {
			var parts []string
			if json.Unmarshal(cr.Prompt, &parts) != nil {
				return fmt.Errorf("prompt must be a string or an array of strings")
			}
			for _, p := range parts {
				prompt += p
			}
		}
		x.model = cr.Model
		x.vreq = &validator.Request{}
		if cr.System != "" {
			x.vreq.Messages = append(x.vreq.Messages, validator.Message{Role: "system", Content: cr.System})
		}
		x.vreq.Messages = append(x.vreq.Messages, validator.Message{Role: "user", Content: prompt})
		if cr.MaxTokens != nil {
			x.vreq.MaxTokens = *cr.MaxTokens
		}
		if x.route == routeCompletions {
			x.stream = cr.Stream
		}
	}
	if x.route.ndjson() {
		if x.model == "" {
			return fmt.Errorf("model is required")
		}
		// Ollama streams unless told not to.
		x.stream = true
		if s, ok := x.body["stream"]; ok && string(s) == "false" {
			x.stream = false
		}
		opts := x.body.object("options")
		if n, ok := opts["num_predict"]; ok {
			json.Unmarshal(n, &x.vreq.MaxTokens)
		}
		if f, ok := x.body["format"]; ok && len(f) > 0 && string(f) != "null" && string(f) != `""` {
			if string(f) == `"json"` {
				x.vreq.ResponseFormat = &validator.ResponseFormat{Type: "json_object"}
			} else if f[0] == '{' {
				x.vreq.ResponseFormat = &validator.ResponseFormat{Type: "json_schema", Schema: f}
			}
		}
	}
	return nil
}

// reject answers a request that never reached an upstream.
func (x *exchange) reject(status int, e apiError) {
	if x.route.ndjson() {
		writeJSON(x.w, status, map[string]string{"error": e.Message})
	} else {
		writeError(x.w, status, e, nil)
	}
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
	route   routeKind
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

	// text is the output: the released prefix text[:sent] plus the
	// current attempt's text after it.
	text    []byte
	sent    int
	pending []pend
	step    pipeline.Step // the attempt's step after the last feed
	tpl     template
	// spare are buffers of released pending chunks, reused by keep;
	// scratch holds a synthesized chunk until emit copies it.
	spare   [][]byte
	scratch []byte
	rc      *http.ResponseController // made once, for every write
	batch   bool                     // release leaves the write to the end of the batch
	outBuf  *[]byte                  // out's pooled storage (recycle)

	tools toolAcc
	acc   fieldAcc // a non-streaming answer's other fields (rebuild.go)
	// result, when set, makes this the exchange of one of several
	// choices (choices.go): its end is recorded there, not published.
	result   *subResult
	olTools  []json.RawMessage
	heldTool [][]byte
	tail     [][]byte
	finish   string

	wroteHeader bool
	out         []byte // write buffer (stream)
	firstUp     time.Time
	firstOut    time.Time
	lastUp      time.Time // the last upstream chunk read
	heldMax     int

	tokens  []tokenSpan // the current attempt's text chunks (budget.go)
	carried int         // released tokens of earlier attempts
}

// pend is an upstream chunk not yet (wholly) given to the client, with
// the output offsets of its text.
type pend struct {
	raw        []byte
	start, end int
	owned      bool
}

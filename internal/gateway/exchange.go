package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/tracing"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// exchange is the state of one client request across its attempts. Each
// part has one owner: the client's request (req, read once), the output
// and the client's side of it (out, the releaser: the only code that
// changes the text and the chunks waiting to go out), what the current
// attempt read of the upstream (cur, replaced whole by every attempt) and
// what the attempts add up to (tally).
type exchange struct {
	g      *Gateway
	w      http.ResponseWriter
	r      *http.Request
	route  dialect
	id     string
	start  time.Time
	cancel context.CancelFunc // ends the request (the client stopped reading)

	req request            // what the client asked, as the gateway reads it
	up  *upstream.Upstream // the upstream the attempts go to

	out   releaser     // the output, what was sent of it and what waits
	tpl   template     // the answer's identity (out frames with it)
	cur   attemptState // what the current attempt read (intake.go)
	tally tally        // what the attempts so far add up to

	// ended, when set, makes this the exchange of one of several choices
	// (choices.go): how it ended is recorded there, not published.
	ended *ending
}

// ending is how the exchange of one choice ended.
type ending struct {
	outcome string
	status  int
	// collect asks a non-streaming choice that passes for its answer
	// rather than a body.
	collect bool
	kept    *choiceAnswer
}

// choiceAnswer is a passed choice's answer, for the request's one body.
type choiceAnswer struct {
	top  rawBody // the top-level members of its closing chunks
	out  *output
	meta *meta
}

// tally is what the attempts of one request add up to.
type tally struct {
	attempts     int
	stallRetried bool
	repaired     bool
	repairedFor  []validator.Reason // what the repairs mended, in order, once each
	optimistic   bool               // the attempt's checks release optimistically
	capped       bool               // the response passed MaxResponseBytes
	holding      bool               // tool calls wait for a person's approval

	// notes are findings the gateway adds to the verdict without changing
	// it (invalid UTF-8 it replaced); utf8Noted says that one was added.
	notes     []validator.Finding
	utf8Noted bool

	firstUp time.Time // the first upstream text
	lastUp  time.Time // the last upstream chunk read
}

// attemptState is what one attempt read of the upstream besides its
// text (which the releaser keeps). Every attempt starts from a new one.
type attemptState struct {
	step     pipeline.Step // the attempt's step after the last feed
	tools    toolAcc       // the tool calls, as the dialect assembles them
	heldTool [][]byte      // streamed tool-call chunks, sent with the verdict
	tail     [][]byte      // the chunks from finish_reason on (usage, timings)
	finish   string        // the finish reason, once read
	acc      fieldAcc      // a non-streaming answer's other fields (rebuild.go)

	// think follows a <think> section at the start of the output's text
	// (from textFrom, 0); passed is the reasoning the policy passes
	// unchecked (reasoning.go).
	think    thinkState
	textFrom int
	passed   []byte
}

// keepTail keeps the chunks from finish_reason on (usage, timings): they
// go out after the verdict, the last one carrying it.
func (s *attemptState) keepTail(p []byte, c *chunk) {
	if c.finish && s.finish == "" {
		s.finish = c.finishReason
		if s.finish == "" {
			s.finish = "stop"
		}
	}
	if p != nil {
		s.tail = append(s.tail, clone(p))
	}
}

// bindReleaser gives the releaser what it needs of the exchange, once,
// before the first attempt.
func (x *exchange) bindReleaser() {
	x.out.bind(x.w, x.route, &x.tpl, x.req.stream, x.g.clock(), x.g.clientWriteTimeout(), x.cancel)
}

// publish sends e to the event bus (redact.go says what it redacts); the
// request's trace, when it is traced, records the same redacted event.
func (x *exchange) publish(e events.Event) {
	e = x.g.publish(e, x.req.logText)
	if x.r != nil {
		tracing.Note(x.r.Context(), e)
	}
}

// event is an event of kind about this request, its identity filled in.
func (x *exchange) event(kind events.Kind) events.Event {
	return events.Event{Kind: kind, RequestID: x.id, Route: x.route.String(), Upstream: x.upName(), Model: x.req.model,
		Attempt: x.tally.attempts}
}

// eventText returns the attempt's output for an event when the policy
// allows logging outputs (log_text), else "". Finding offsets index it.
func (x *exchange) eventText() string {
	if !x.req.logText {
		return ""
	}
	return string(x.out.text)
}

func (x *exchange) upName() string {
	if x.up == nil {
		return ""
	}
	return x.up.Name
}

// sofar is what the policy's Next decides on besides the verdict;
// fixTried says the local repair was already tried on the attempt.
func (x *exchange) sofar(fixTried bool) policy.SoFar {
	return policy.SoFar{Attempts: x.tally.attempts, MaxAttempts: x.g.maxAttempts(), Sent: x.out.sent > 0,
		Optimistic: x.tally.optimistic, ToolCalls: x.cur.tools.hasCalls(), FixTried: fixTried,
		StallRetried: x.tally.stallRetried, Capped: x.tally.capped}
}

// decide turns a gateway-made finding into a verdict under the policy,
// where no attempt is there to take it (its checks could not be built, or
// the upstream refused the client's own request).
func (x *exchange) decide(f validator.Finding) validator.Verdict {
	return x.g.policy().Decide([]validator.Finding{f}, x.tally.attempts)
}

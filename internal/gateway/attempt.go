package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// resultKind is how one attempt ended.
type resultKind int

const (
	resPass      resultKind = iota // the output passed and was released
	resFail                        // a check (or the stall watchdog) failed it
	resCancelled                   // the client went away
	resRefused                     // the upstream refused before streaming
)

type result struct {
	kind    resultKind
	verdict validator.Verdict
	// status and body are the upstream's refusal (resRefused); status 0
	// means it could not be reached.
	status int
	body   []byte
	err    error
}

// run makes attempts until one passes, the client leaves, or the request
// halts.
func (x *exchange) run() {
	body := x.firstBody()
	for {
		x.attempts++
		res := x.attempt(x.attempts, body)
		switch res.kind {
		case resPass:
			v := res.verdict
			x.publish(events.Event{Kind: events.Verdict, RequestID: x.id, Route: x.route.String(), Upstream: x.up.Name,
				Model: x.model, Attempt: x.attempts, Verdict: &v, HeldBytes: x.heldMax})
			x.pass(res.verdict)
			return
		case resCancelled:
			x.finished(events.OutcomeCancelled, 0)
			return
		case resRefused:
			// Only the client's own request can be refused as such; a
			// refused retry is the gateway's doing and halts below.
			if x.attempts == 1 && x.sent == 0 && !x.wroteHeader {
				x.refused(res)
				return
			}
			res.verdict = x.decide(validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError,
				Start: x.sent, End: x.sent, Message: res.errMessage()})
		}
		v := res.verdict
		x.publish(events.Event{Kind: events.Verdict, RequestID: x.id, Route: x.route.String(), Upstream: x.up.Name,
			Model: x.model, Attempt: x.attempts, Verdict: &v, Text: x.eventText()})
		if !x.retryable(v) {
			x.halt(v)
			return
		}
		x.publish(x.timed(events.Event{Kind: events.Retry, RequestID: x.id, Route: x.route.String(), Upstream: x.up.Name,
			Model: x.model, Attempt: x.attempts, Verdict: &v, Text: x.eventText()}))
		x.repaired = true
		body = x.corrected(v)
	}
}

// retryable reports whether a failed attempt gets another one, and for a
// stall, picks the upstream for it.
func (x *exchange) retryable(v validator.Verdict) bool {
	if !v.Action.IsRetry() || x.attempts >= x.g.maxAttempts() {
		return false
	}
	if x.optimistic && x.sent > 0 {
		// The client has seen text a check rejected: no repair can hide it.
		return false
	}
	if v.Reason == validator.ReasonStall {
		if x.stallRetried {
			return false
		}
		x.stallRetried = true
		ctx, cancel := context.WithTimeout(x.r.Context(), 2*time.Second)
		defer cancel()
		if err := x.up.Health(ctx); err != nil {
			fb := x.g.fallback(x.up, x.model)
			if fb == x.up {
				return false
			}
			x.up = fb
		}
	}
	return true
}

func (r *result) errMessage() string {
	switch {
	case r.err != nil:
		return r.err.Error()
	case r.status != 0:
		return fmt.Sprintf("upstream answered %d: %q", r.status, clip(r.body, 300))
	}
	return "upstream error"
}

// decide turns a gateway-made finding into a verdict under the policy.
func (x *exchange) decide(f validator.Finding) validator.Verdict {
	return x.g.policy().Decide([]validator.Finding{f}, x.attempts)
}

// attempt sends body upstream and streams the answer through a fresh set
// of checks, releasing text as the release point advances.
func (x *exchange) attempt(n int, body []byte) result {
	chk, err := x.g.newChecker(x.vreq)
	if err != nil {
		return result{kind: resFail, verdict: x.decide(validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError, Message: "building checks: " + err.Error()})}
	}
	x.optimistic = chk.Mode() == policy.ModeOptimistic
	// The new attempt continues the released prefix: its checks see the
	// whole output.
	x.text = x.text[:x.sent]
	x.pending = x.pending[:0]
	x.tools = toolAcc{}
	x.olTools, x.heldTool, x.tail, x.finish = nil, nil, nil, ""
	if x.sent > 0 {
		chk.Write(x.text)
	}
	x.publish(events.Event{Kind: events.AttemptStarted, RequestID: x.id, Route: x.route.String(), Upstream: x.up.Name, Model: x.model, Attempt: n})

	ctx, cancel := context.WithCancel(x.r.Context())
	defer cancel()
	// The stall watchdog: a timer armed at the checks' next deadline (or
	// the idle timeout) cancels the upstream request. It runs from before
	// the request is sent, so the time to first token covers an upstream
	// that never sends its response headers.
	var stalled atomic.Bool
	timer := time.AfterFunc(time.Hour, func() { stalled.Store(true); cancel() })
	defer timer.Stop()
	idle := x.g.idleTimeout()
	arm := func(now time.Time) {
		chk.Tick(now) // text written since the last tick arrived now
		d := chk.NextDeadline()
		if idle > 0 && (d.IsZero() || now.Add(idle).Before(d)) {
			d = now.Add(idle)
		}
		if d.IsZero() {
			timer.Stop()
			return
		}
		timer.Reset(d.Sub(now))
	}
	arm(x.g.now())

	path, _ := x.route.upstreamPath(x.up.Kind)
	resp, err := x.up.Post(ctx, path, body, nil)
	if err != nil {
		if stalled.Load() {
			return result{kind: resFail, verdict: x.stallVerdict(chk, n, x.g.now())}
		}
		if x.r.Context().Err() != nil {
			return result{kind: resCancelled}
		}
		return result{kind: resRefused, err: err}
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return result{kind: resRefused, status: resp.StatusCode, body: b}
	}
	var st *upstream.Stream
	if x.route.ndjson() {
		st = upstream.NewNDJSONStream(resp.Body)
	} else {
		st = upstream.NewSSEStream(resp.Body)
	}
	defer st.Close()

	var c chunk
	for {
		p, err := st.Next()
		if err == io.EOF {
			break
		}
		now := x.g.now()
		if err != nil {
			switch {
			case stalled.Load():
				return result{kind: resFail, verdict: x.stallVerdict(chk, n, now)}
			case x.r.Context().Err() != nil:
				return result{kind: resCancelled}
			}
			x.releaseCleared(chk)
			return result{kind: resFail, verdict: x.upstreamVerdict(chk, n, err)}
		}
		p = x.validUTF8(p)
		if err := x.route.parse(p, &c); err != nil {
			x.releaseCleared(chk)
			return result{kind: resFail, verdict: x.upstreamVerdict(chk, n, err)}
		}
		if v, over := x.overCap(&c, n); over {
			cancel()
			return result{kind: resFail, verdict: v}
		}
		if c.errMsg != "" {
			x.releaseCleared(chk)
			return result{kind: resFail, verdict: x.upstreamVerdict(chk, n, fmt.Errorf("upstream error in stream: %q", c.errMsg))}
		}
		x.tpl.learn(&c, n)
		if x.tpl.foreign(x.route, &c, n) {
			p = x.tpl.restamp(p) // a hidden retry continues the first attempt's answer
		}
		x.lastUp = now
		if !x.feed(chk, p, &c, now) {
			if r, ok := x.fixSyntax(chk, st, n); ok {
				return r
			}
			cancel() // stop the generation at once: a loop must not run to max_tokens
			return result{kind: resFail, verdict: chk.Verdict(n)}
		}
		arm(now)
	}
	for _, tc := range x.tools.validator() {
		chk.ToolCall(tc)
	}
	for i, tc := range x.olTools {
		chk.ToolCall(olToolCall(i, tc))
	}
	chk.Close()
	if chk.Failed() {
		if r, ok := x.fixSyntax(chk, st, n); ok {
			return r
		}
		return result{kind: resFail, verdict: chk.Verdict(n)}
	}
	x.release(chk.ReleasePoint())
	return result{kind: resPass, verdict: chk.Verdict(n)}
}

// feed hands one parsed chunk to the checks and releases what they
// cleared. It reports false when the checks failed the output.
func (x *exchange) feed(chk Checker, p []byte, c *chunk, now time.Time) bool {
	if !x.stream {
		x.acc.add(x.attempts, x.route, p)
	}
	switch {
	case c.hasText:
		if x.firstUp.IsZero() {
			x.firstUp = now
		}
		start := len(x.text)
		x.text = append(x.text, c.text...)
		x.noteToken(start, len(x.text))
		chk.Write(x.text[start:])
		if x.stream {
			x.pending = append(x.pending, pend{raw: p, start: start, end: len(x.text)})
		}
		if c.finish {
			x.keepTail(nil, c) // the chunk itself goes out with the text
		}
	case len(c.toolCalls) > 0 || len(c.olToolCalls) > 0:
		x.tools.add(c.toolCalls)
		x.olTools = append(x.olTools, c.olToolCalls...)
		if x.stream {
			x.heldTool = append(x.heldTool, clone(p))
		}
		if c.finish {
			x.keepTail(nil, c)
		}
	case c.finish || x.finish != "":
		x.keepTail(p, c)
	default:
		// A chunk without text (the role chunk): it goes out when the text
		// before it does; a retry's own role chunk is dropped when the
		// client already has one, so the repaired answer reads as one.
		if x.stream && !(x.attempts > x.tpl.attempt && x.wroteHeader) {
			x.pending = append(x.pending, pend{raw: p, start: len(x.text), end: len(x.text)})
		}
	}
	if chk.Failed() {
		return false
	}
	x.release(chk.ReleasePoint())
	if held := len(x.text) - x.sent; held > x.heldMax {
		x.heldMax = held
	}
	// Chunks still pending must outlive the stream reader's buffer.
	for i := len(x.pending) - 1; i >= 0 && !x.pending[i].owned; i-- {
		x.pending[i].raw, x.pending[i].owned = x.keep(x.pending[i].raw), true
	}
	return true
}

// keepTail keeps the chunks from finish_reason on (usage, timings): they
// go out after the verdict, the last one carrying it.
func (x *exchange) keepTail(p []byte, c *chunk) {
	if c.finish && x.finish == "" {
		x.finish = c.finishReason
		if x.finish == "" {
			x.finish = "stop"
		}
	}
	if p != nil {
		x.tail = append(x.tail, clone(p))
	}
}

func clone(p []byte) []byte { return append([]byte(nil), p...) }

// keep copies a chunk that must outlive the stream reader's buffer into a
// buffer released chunks gave back, so that holding chunks back costs no
// allocation once a stream is under way.
func (x *exchange) keep(p []byte) []byte {
	if n := len(x.spare); n > 0 {
		b := x.spare[n-1]
		x.spare = x.spare[:n-1]
		return append(b, p...)
	}
	return clone(p)
}

// stallVerdict judges an attempt whose upstream stopped sending: the
// checks' stall watchdog when it fired, else the gateway's idle timeout.
func (x *exchange) stallVerdict(chk Checker, n int, now time.Time) validator.Verdict {
	chk.Tick(now)
	if chk.Failed() {
		if v := chk.Verdict(n); v.Reason == validator.ReasonStall {
			return v
		}
	}
	return x.decide(validator.Finding{Check: "gateway", Reason: validator.ReasonStall, Start: len(x.text), End: len(x.text),
		Message: fmt.Sprintf("no chunk from the upstream for %s", x.g.idleTimeout())})
}

func (x *exchange) upstreamVerdict(chk Checker, n int, err error) validator.Verdict {
	return x.decide(validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError, Start: len(x.text), End: len(x.text), Message: err.Error()})
}

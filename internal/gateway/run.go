package gateway

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// run makes attempts until one passes, the client leaves, or the request
// halts.
func (x *exchange) run() {
	x.bindReleaser()
	body := x.firstBody()
	for {
		x.tally.attempts++
		res := x.try(x.tally.attempts, body)
		switch res.kind {
		case resPass:
			ev := x.event(events.Verdict)
			ev.Verdict, ev.HeldBytes = &res.verdict, x.out.heldMax
			ev.ToolCalls = x.toolOutcomes(res.verdict)
			x.publish(ev)
			x.pass(res.verdict)
			return
		case resCancelled:
			x.finished(events.OutcomeCancelled, 0)
			return
		case resRefused: // the client's own request (a refused retry fails its attempt)
			x.refused(res)
			return
		}
		v := x.explainCutShort(res.verdict)
		ev := x.event(events.Verdict)
		ev.Verdict, ev.Text = &v, x.eventText()
		ev.ToolCalls = x.toolOutcomes(v)
		x.publish(ev)
		if x.approvable(v) {
			x.awaitApproval(v)
			return
		}
		if !x.retryable(v) {
			x.halt(v)
			return
		}
		rv := retriedAs(v)
		ev = x.event(events.Retry)
		ev.Verdict, ev.Text = &rv, x.eventText()
		x.publish(x.incidentTimed(ev))
		x.noteRepair(v.Reason)
		body = x.corrected(v)
	}
}

// retryable reports whether a failed attempt gets another one (the
// policy's Next decides), and for a stall, picks the upstream for it.
func (x *exchange) retryable(v validator.Verdict) bool {
	s := x.sofar(true)
	s.CutShort = x.cutShort(v)
	switch x.g.policy().Next(v, s) {
	case policy.Halt:
		return false
	case policy.Probe:
		x.tally.stallRetried = true
		ctx, cancel := context.WithTimeout(x.r.Context(), 2*time.Second)
		defer cancel()
		if err := x.up.Health(ctx); err != nil {
			fb := x.g.fallback(x.up, x.req.model)
			if fb == x.up {
				return false
			}
			x.up = fb
		}
	}
	return true
}

// try makes attempt n: it sends body upstream and streams the answer
// through a fresh set of checks (attemptLoop), releasing text as the
// checks allow.
func (x *exchange) try(n int, body []byte) result {
	x.req.vreq.ID, x.req.vreq.Attempt = x.id, n
	chk, err := x.g.newChecker(x.req.vreq)
	if err != nil {
		return result{kind: resFail, verdict: x.decide(validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError, Message: "building checks: " + err.Error()})}
	}
	defer chk.Stop()
	clk := x.g.clock()
	x.tally.optimistic = chk.Mode() == policy.ModeOptimistic
	// The new attempt continues the released prefix: its checks see the
	// whole output.
	x.out.restart()
	x.cur = attemptState{think: thinkAt(x.out.text[:x.out.sent])}
	if x.out.sent > 0 {
		x.out.refeed(chk, x.out.sent, clk.Now())
	}
	x.publish(x.event(events.AttemptStarted))

	ctx, cancel := context.WithCancel(x.r.Context())
	defer cancel()
	rd := startReader(ctx, x.send(body), clk, readerHooks{x.g.readHook, x.g.closeHook})
	defer func() {
		cancel() // unblocks the reader
		<-rd.done
		rd.release()
	}()
	l := &attemptLoop{x: x, n: n, chk: chk, rd: rd, cancel: cancel, idle: x.g.idleTimeout(), ctx: ctx}
	return l.run(clk)
}

// send returns what the reader calls to send body upstream: the
// upstream's stream, or how it refused.
func (x *exchange) send(body []byte) func(context.Context) (*upstream.Stream, *result) {
	path, _ := x.route.upstreamPath(x.up.Kind)
	up, route := x.up, x.route
	return func(ctx context.Context) (*upstream.Stream, *result) {
		resp, err := up.Post(ctx, path, body, nil)
		if err != nil {
			return nil, &result{kind: resRefused, err: err}
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			return nil, &result{kind: resRefused, status: resp.StatusCode, body: b}
		}
		return route.newStream(resp.Body), nil
	}
}

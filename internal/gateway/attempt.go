package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
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
	x.bindReleaser()
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
		case resRefused: // the client's own request (a refused retry fails its attempt)
			x.refused(res)
			return
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

// retryable reports whether a failed attempt gets another one (see
// decideNext), and for a stall, picks the upstream for it.
func (x *exchange) retryable(v validator.Verdict) bool {
	switch decideNext(v, sofar{attempts: x.attempts, maxAttempts: x.g.maxAttempts(), optimisticSent: x.optimistic && x.sent > 0, stallRetried: x.stallRetried, capped: x.capped}) {
	case nextHalt:
		return false
	case nextProbe:
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

// decide turns a gateway-made finding into a verdict under the policy,
// where no attempt is there to take it (its checks could not be built, or
// the upstream refused the client's own request).
func (x *exchange) decide(f validator.Finding) validator.Verdict {
	return x.g.policy().Decide([]validator.Finding{f}, x.attempts)
}

// attempt sends body upstream and streams the answer through a fresh set
// of checks, releasing text as the checks allow.
//
// The upstream is asked and read by its own goroutine (see reader) at
// full speed, whatever the client or the checks do; the loop here feeds
// the chunks to the attempt with their arrival times. Two timers, never
// mixed: the idle timer measures upstream silence only (from before the
// request is sent, so it covers an upstream that never answers) and is
// the one thing that makes a gateway stall; the wake timer only ticks the
// checks (the stall check's deadlines, a guard's deadline, max_hold).
func (x *exchange) attempt(n int, body []byte) result {
	x.vreq.ID, x.vreq.Attempt = x.id, n
	chk, err := x.g.newChecker(x.vreq)
	if err != nil {
		return result{kind: resFail, verdict: x.decide(validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError, Message: "building checks: " + err.Error()})}
	}
	defer chk.Stop()
	clk := x.g.clock()
	x.optimistic = chk.Mode() == policy.ModeOptimistic
	// The new attempt continues the released prefix: its checks see the
	// whole output.
	x.restart()
	x.tools = toolAcc{}
	x.olTools, x.heldTool, x.tail, x.finish = nil, nil, nil, ""
	if x.sent > 0 {
		chk.Feed(x.text, clk.Now())
	}
	x.publish(events.Event{Kind: events.AttemptStarted, RequestID: x.id, Route: x.route.String(), Upstream: x.up.Name, Model: x.model, Attempt: n})

	ctx, cancel := context.WithCancel(x.r.Context())
	defer cancel()
	path, _ := x.route.upstreamPath(x.up.Kind)
	rd := startReader(ctx, func() (*upstream.Stream, *result) {
		resp, err := x.up.Post(ctx, path, body, nil)
		if err != nil {
			return nil, &result{kind: resRefused, err: err}
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			return nil, &result{kind: resRefused, status: resp.StatusCode, body: b}
		}
		return x.route.newStream(resp.Body), nil
	}, clk, x.g.readHook)
	defer func() {
		cancel() // unblocks the reader
		<-rd.done
		rd.release()
	}()

	idle := x.g.idleTimeout()
	idleT := clk.NewTimer(time.Hour)
	defer idleT.Stop()
	if idle <= 0 {
		idleT.Stop()
	} else {
		idleT.Reset(idle)
	}
	wakeT := clk.NewTimer(time.Hour)
	defer wakeT.Stop()
	first := chk.Tick(rd.now()) // the stall check's time to first token runs from here
	wake := first.Wake
	if wake.IsZero() {
		wakeT.Stop()
	} else {
		wakeT.Reset(wake.Sub(rd.now()))
	}
	closed := false
	var c chunk

	// upstreamFailed ends the attempt on a broken upstream: what the
	// checks clear of the text as it stands goes out first.
	upstreamFailed := func(err error, at time.Time) (pipeline.Step, *result) {
		x.releaseCleared(chk, at)
		return x.failWith(chk, n, validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError,
			Start: len(x.text), End: len(x.text), Message: err.Error()}, at)
	}
	// drain feeds every chunk the reader has queued; it returns a result
	// when the attempt ended on the upstream's side.
	drain := func() (step pipeline.Step, res *result) {
		// What the chunks of one batch release goes to the client in one
		// write: under load the reader queues several, as a proxy's read
		// returns several. When the batch ends a passed attempt, its
		// text goes out with the verdict (pass).
		x.batch = true
		defer func() {
			x.batch = false
			if !passed(step, res) {
				x.flush()
			}
		}()
		q := rd.take()
		fed := 0 // q[:fed] was fed: feed kept what it holds on to
		defer func() { rd.put(q[:fed]) }()
		for i, uc := range q {
			if closed {
				break
			}
			switch {
			case uc.refused != nil:
				if x.r.Context().Err() != nil {
					return step, &result{kind: resCancelled}
				}
				if n > 1 || x.sent > 0 || x.wroteHeader {
					// Only the client's own request can be refused as
					// such; a refused retry is the gateway's doing.
					return x.failWith(chk, n, validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError,
						Start: x.sent, End: x.sent, Message: uc.refused.errMessage()}, uc.at)
				}
				return step, uc.refused
			case uc.err == io.EOF:
				for _, tc := range x.tools.validator() {
					chk.ToolCall(tc)
				}
				for i, tc := range x.olTools {
					chk.ToolCall(olToolCall(i, tc))
				}
				closed = true
				idleT.Stop() // the upstream is done: its silence no longer matters
				step = chk.CloseAt(uc.at)
				continue
			case uc.err != nil:
				if x.r.Context().Err() != nil {
					return step, &result{kind: resCancelled}
				}
				return upstreamFailed(uc.err, uc.at)
			}
			p := uc.p
			err := x.route.parse(p, &c)
			if err == nil && needsRepair(c.unvetted()) {
				p = x.validUTF8(p)
				err = x.route.parse(p, &c)
			}
			if err != nil {
				return upstreamFailed(err, uc.at)
			}
			if f, over := x.overCap(&c); over {
				cancel()
				x.capped = true
				return x.failWith(chk, n, f, uc.at)
			}
			if c.errMsg != "" {
				return upstreamFailed(fmt.Errorf("upstream error in stream: %q", c.errMsg), uc.at)
			}
			x.tpl.learn(&c, n)
			if x.route.foreign(&x.tpl, &c, n) {
				p = x.tpl.restamp(p) // a hidden retry continues the first attempt's answer
			}
			x.lastUp = uc.at
			if !x.feed(chk, p, &c, uc.at) {
				rd.unread(q[i+1:]) // a local repair reads the rest
				return x.step, nil // failed: the chunk may still be pending
			}
			fed = i + 1
			step = x.step
		}
		if step == (pipeline.Step{}) { // nothing was fed: say where the attempt is
			step = chk.Tick(rd.now())
		}
		return step, nil
	}

	for {
		var step pipeline.Step
		var res *result
		select {
		case <-rd.ready:
			step, res = drain()
			if res == nil && !closed && idle > 0 {
				idleT.Reset(rd.lastArrival().Add(idle).Sub(rd.now()))
			}
		case <-idleT.C():
			if step, res = drain(); res != nil || closed || step.State == pipeline.Done {
				break
			}
			now := rd.now()
			if last := rd.lastArrival(); now.Sub(last) < idle {
				idleT.Reset(last.Add(idle).Sub(now)) // a chunk came meanwhile
				step = chk.Tick(now)
				break
			}
			step = chk.Fail(validator.Finding{Check: "gateway", Reason: validator.ReasonStall, Start: len(x.text), End: len(x.text),
				Message: fmt.Sprintf("no chunk from the upstream for %s", idle)}, now)
		case <-wakeT.C():
			wake = time.Time{}
			if step, res = drain(); res == nil && step.State != pipeline.Done {
				step = chk.Tick(rd.now())
			}
		case <-chk.Notify():
			if step, res = drain(); res == nil && step.State != pipeline.Done {
				step = chk.Tick(rd.now())
			}
		case <-x.r.Context().Done():
			return result{kind: resCancelled}
		}
		if res != nil {
			return *res
		}
		if step.State == pipeline.Done && step.Failed {
			if r, ok := x.fixSyntax(chk, rd.next(x.r.Context()), n); ok {
				return r
			}
			cancel() // stop the generation at once: a loop must not run to max_tokens
		}
		if passed(step, res) {
			// pass releases the rest of the text with the verdict: one
			// write ends the stream.
			return result{kind: resPass, verdict: chk.Verdict(n)}
		}
		// What the checks cleared goes out, also before a failure: a
		// retry continues it.
		x.release(step.Release)
		if step.State == pipeline.Done { // failed
			return result{kind: resFail, verdict: chk.Verdict(n)}
		}
		x.noteHeld()
		if !step.Wake.Equal(wake) {
			wake = step.Wake
			if wake.IsZero() {
				wakeT.Stop()
			} else {
				wakeT.Reset(wake.Sub(rd.now()))
			}
		}
	}
}

// passed reports whether an attempt's step ends it passed: what is left
// of its output then goes out with the verdict.
func passed(step pipeline.Step, res *result) bool {
	return res == nil && step.State == pipeline.Done && !step.Failed
}

// feed hands one parsed chunk to the checks and releases what they
// cleared; x.step is the attempt's step after it. It reports false when
// the checks failed the output.
func (x *exchange) feed(chk Checker, p []byte, c *chunk, at time.Time) bool {
	if !x.stream {
		x.acc.add(x.attempts, x.route, p)
	}
	fed := false
	switch {
	case c.hasText:
		if x.firstUp.IsZero() {
			x.firstUp = at
		}
		start := len(x.text)
		x.text = append(x.text, c.text...)
		x.noteToken(start, len(x.text))
		x.step, fed = chk.Feed(x.text[start:], at), true
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
	if !fed {
		x.step = chk.Tick(at)
	}
	if x.step.Failed {
		return false
	}
	x.release(x.step.Release)
	x.noteHeld()
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

// failWith ends the attempt with a finding the gateway made (the upstream
// broke off or refused a retry, the response passed the memory cap): the
// finding enters the attempt like any check's, so the attempt's verdict,
// under the policy, is the one source of the outcome.
func (x *exchange) failWith(chk Checker, n int, f validator.Finding, at time.Time) (pipeline.Step, *result) {
	step := chk.Fail(f, at)
	return step, &result{kind: resFail, verdict: chk.Verdict(n)}
}

package gateway

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// attemptLoop runs one attempt: the upstream is asked and read by its own
// goroutine (see reader) at full speed, whatever the client or the checks
// do; the loop feeds the chunks to the checks with their arrival times
// and hands what they clear to the releaser. Two timers, never mixed: the
// idle timer measures upstream silence only (from before the request is
// sent, so it covers an upstream that never answers) and is the one thing
// that makes a gateway stall; the wake timer only ticks the checks (the
// stall check's deadlines, a guard's deadline, max_hold).
type attemptLoop struct {
	x      *exchange
	n      int // the attempt
	chk    Checker
	rd     *reader
	cancel context.CancelFunc // stops the upstream's generation
	idle   time.Duration
	idleT  clock.Timer
	wakeT  clock.Timer
	wake   time.Time // when wakeT fires, zero when stopped
	closed bool      // the upstream ended its answer
	c      chunk
	ka     *keepAlive      // comments on a held stream (keepalive.go); nil: none
	ctx    context.Context // the attempt's
	work   *workWatch      // asks the upstream about its work before the first event (liveness.go); nil: none
}

// run waits for the upstream, the timers, the checks and the client until
// the attempt ends.
func (l *attemptLoop) run(clk clock.Clock) result {
	l.idleT = clk.NewTimer(time.Hour)
	defer l.idleT.Stop()
	if l.idle <= 0 {
		l.idleT.Stop()
	} else {
		l.idleT.Reset(l.idle)
	}
	l.wakeT = clk.NewTimer(time.Hour)
	defer l.wakeT.Stop()
	l.ka = l.x.startKeepAlive(clk)
	defer l.ka.stop()
	if l.work = l.x.startWork(clk, l.rd.now()); l.work != nil {
		defer l.work.stop()
	}
	// The stall check's time to first token runs from here.
	l.setWake(l.chk.Tick(l.rd.now()).Wake, true)
	for {
		step, res := l.wait()
		if res != nil {
			return *res
		}
		if r, done := l.settle(step); done {
			return l.explainStall(r)
		}
	}
}

// loopState is where an attempt's loop is when it waits (for waitHook).
type loopState struct {
	taken     int       // payloads taken from the upstream's reader
	ended     bool      // the upstream ended its answer
	keepAlive time.Time // when the keep-alive timer fires; zero: none armed
	approval  string    // the approval the held tool calls wait for; "": none
	workAsked int       // answers the upstream gave about its work (liveness.go)
}

// wait handles the next thing that happens and returns the attempt's
// step after it, or the result that ends the attempt.
func (l *attemptLoop) wait() (pipeline.Step, *result) {
	if h := l.x.g.waitHook; h != nil {
		h(loopState{taken: l.rd.taken(), ended: l.closed, keepAlive: l.ka.due(), workAsked: l.work.answered()})
	}
	select {
	case <-l.rd.ready:
		step, res := l.onBatch()
		if res == nil && !l.closed && l.idle > 0 {
			l.idleT.Reset(l.lastSign().Add(l.idle).Sub(l.rd.now()))
		}
		return step, res
	case <-l.idleT.C():
		return l.onIdle()
	case <-l.wakeT.C():
		l.wake = time.Time{}
		return l.onTick()
	case <-l.chk.Notify():
		return l.onTick()
	case <-l.ka.C():
		l.x.keepAliveFired(l.ka)
		return l.onTick()
	case <-l.work.timer():
		return l.onWorkDue()
	case a := <-l.work.answer():
		return l.onWorkAnswer(a)
	case <-l.x.r.Context().Done():
		return pipeline.Step{}, &result{kind: resCancelled}
	}
}

// onTick feeds what arrived, then lets the checks see the time.
func (l *attemptLoop) onTick() (pipeline.Step, *result) {
	step, res := l.onBatch()
	if res == nil && step.State != pipeline.Done {
		step = l.chk.Tick(l.rd.now())
	}
	return step, res
}

// onIdle handles the idle timer: an upstream silent for the idle timeout
// fails the attempt with a stall.
func (l *attemptLoop) onIdle() (pipeline.Step, *result) {
	step, res := l.onBatch()
	if res != nil || l.closed || step.State == pipeline.Done {
		return step, res
	}
	now := l.rd.now()
	if last := l.lastSign(); now.Sub(last) < l.idle {
		l.idleT.Reset(last.Add(l.idle).Sub(now)) // a chunk came meanwhile
		return l.chk.Tick(now), nil
	}
	x := l.x
	return l.chk.Fail(validator.Finding{Check: "gateway", Reason: validator.ReasonStall, Start: len(x.out.text), End: len(x.out.text),
		Message: fmt.Sprintf("no chunk from the upstream for %s", l.idle)}, now), nil
}

// settle acts on the attempt's step: a failure ends the attempt (or is
// repaired locally), a pass ends it, else what the checks cleared goes
// out and the wake timer follows the checks.
func (l *attemptLoop) settle(step pipeline.Step) (result, bool) {
	x := l.x
	if step.State == pipeline.Done && step.Failed {
		if v := l.chk.Verdict(l.n); x.g.policy().Next(v, x.sofar(false)) == policy.FixSyntax {
			if r, ok := x.fixSyntax(v, l.rd.next(x.r.Context()), l.n); ok {
				return r, true
			}
		}
		l.cancel() // stop the generation at once: a loop must not run to max_tokens
	}
	if passed(step, nil) {
		// pass releases the rest of the text with the verdict: one
		// write ends the stream.
		return result{kind: resPass, verdict: l.chk.Verdict(l.n)}, true
	}
	// What the checks cleared goes out, also before a failure: a retry
	// continues it.
	x.out.release(step.Release)
	if step.State == pipeline.Done { // failed
		return result{kind: resFail, verdict: l.chk.Verdict(l.n)}, true
	}
	x.out.noteHeld()
	l.setWake(step.Wake, false)
	return result{}, false
}

// setWake sets the wake timer to wake, when it changed (or always).
func (l *attemptLoop) setWake(wake time.Time, always bool) {
	if !always && wake.Equal(l.wake) {
		return
	}
	l.wake = wake
	if wake.IsZero() {
		l.wakeT.Stop()
	} else {
		l.wakeT.Reset(wake.Sub(l.rd.now()))
	}
}

// passed reports whether an attempt's step ends it passed: what is left
// of its output then goes out with the verdict.
func passed(step pipeline.Step, res *result) bool {
	return res == nil && step.State == pipeline.Done && !step.Failed
}

// onBatch feeds every chunk the reader has queued; it returns a result
// when the attempt ended on the upstream's side. What the chunks of one
// batch release goes to the client in one write: under load the reader
// queues several, as a proxy's read returns several. When the batch ends
// a passed attempt, its text goes out with the verdict (pass).
func (l *attemptLoop) onBatch() (step pipeline.Step, res *result) {
	x := l.x
	x.out.startBatch()
	defer func() { x.out.endBatch(!passed(step, res)) }()
	q := l.rd.take()
	fed := 0 // q[:fed] was fed: feed kept what it holds on to
	defer func() { l.rd.put(q[:fed]) }()
	for i, uc := range q {
		if l.closed {
			break
		}
		switch {
		case uc.refused != nil:
			return pipeline.Step{}, l.onRefused(uc)
		case uc.err == io.EOF:
			step = l.onEOF(uc.at)
			continue
		case uc.err != nil:
			if x.r.Context().Err() != nil {
				return step, &result{kind: resCancelled}
			}
			return l.upstreamFailed(uc.err, uc.at)
		}
		p, err := x.intake(uc.p, &l.c, l.n)
		if err != nil {
			return l.badChunk(err, uc.at)
		}
		x.tally.lastUp = uc.at
		if !x.feed(l.chk, p, &l.c, uc.at) {
			l.rd.unread(q[i+1:])   // a local repair reads the rest
			return x.cur.step, nil // failed: the chunk may still be pending
		}
		fed = i + 1
		step = x.cur.step
	}
	if step == (pipeline.Step{}) { // nothing was fed: say where the attempt is
		step = l.chk.Tick(l.rd.now())
	}
	return step, nil
}

// onRefused ends the attempt the upstream refused (or could not be asked).
func (l *attemptLoop) onRefused(uc upChunk) *result {
	x := l.x
	if x.r.Context().Err() != nil {
		return &result{kind: resCancelled}
	}
	if l.n > 1 || x.out.sent > 0 || x.out.wroteHeader {
		// Only the client's own request can be refused as such; a
		// refused retry is the gateway's doing.
		_, res := l.failWith(validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError,
			Start: x.out.sent, End: x.out.sent, Message: uc.refused.errMessage()}, uc.at)
		return res
	}
	return uc.refused
}

// onEOF closes the attempt's checks: the upstream's answer is whole.
func (l *attemptLoop) onEOF(at time.Time) pipeline.Step {
	for _, tc := range l.x.cur.tools.calls() {
		l.chk.ToolCall(tc)
	}
	l.closed = true
	l.idleT.Stop() // the upstream is done: its silence no longer matters
	if fs := l.x.cur.tools.problems(); len(fs) > 0 {
		// Deltas that do not make a call: the call is malformed.
		return l.chk.Fail(fs[0], at)
	}
	return l.chk.CloseAt(at)
}

// badChunk ends the attempt on a chunk intake refused.
func (l *attemptLoop) badChunk(err *intakeError, at time.Time) (pipeline.Step, *result) {
	if err.err != nil {
		return l.upstreamFailed(err.err, at)
	}
	l.cancel()
	l.x.tally.capped = true
	return l.failWith(err.over, at)
}

// upstreamFailed ends the attempt on a broken upstream: what the checks
// clear of the text as it stands goes out first.
func (l *attemptLoop) upstreamFailed(err error, at time.Time) (pipeline.Step, *result) {
	x := l.x
	x.out.releaseCleared(l.chk, at)
	return l.failWith(validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError,
		Start: len(x.out.text), End: len(x.out.text), Message: err.Error()}, at)
}

// failWith ends the attempt with a finding the gateway made (the upstream
// broke off or refused a retry, the response passed the memory cap): the
// finding enters the attempt like any check's, so the attempt's verdict,
// under the policy, is the one source of the outcome.
func (l *attemptLoop) failWith(f validator.Finding, at time.Time) (pipeline.Step, *result) {
	step := l.chk.Fail(f, at)
	return step, &result{kind: resFail, verdict: l.chk.Verdict(l.n)}
}

// feed hands one parsed chunk to the checks and releases what they
// cleared; x.cur.step is the attempt's step after it. It reports false
// when the checks failed the output.
func (x *exchange) feed(chk Checker, p []byte, c *chunk, at time.Time) bool {
	s := &x.cur
	if !x.req.stream {
		s.acc.add(x.tally.attempts, x.route, p)
	}
	fed := false
	ev := c.events()
	mode := x.g.policy().Reasoning
	if h, ok := x.route.(reasoningHider); ok && x.req.stream && mode == policy.ReasoningHide {
		p = h.hideReasoning(p) // its closing events repeat the reasoning whole
	}
	if ev.has(evReasoning) {
		fed = x.feedReasoning(chk, p, c, at, mode)
		if s.step.Failed {
			return false
		}
	}
	switch {
	case ev.has(evText):
		x.feedText(chk, p, c, at, mode, ev.has(evReasoning) && x.req.stream)
		fed = true
		if c.finish {
			s.keepTail(nil, c) // the chunk itself goes out with the text
		}
	case ev.has(evToolCall):
		s.tools.add(c)
		if x.req.stream {
			s.heldTool = append(s.heldTool, clone(p))
		}
		if c.finish {
			s.keepTail(nil, c)
		}
		s.step, fed = chk.Progress(at, true), true
	case ev.has(evReasoning):
		if c.finish {
			s.keepTail(nil, c)
		}
	case c.finish || s.finish != "":
		s.keepTail(p, c)
		if ev != 0 {
			s.step, fed = chk.Progress(at, false), true
		}
	default:
		// A chunk without text (the role chunk): it goes out when the text
		// before it does; a retry's own role chunk is dropped when the
		// client already has one, so the repaired answer reads as one
		// (a chunk that closes a content block or output item is the
		// retry's close of the part the client reads, and goes out).
		if x.req.stream && (c.closesPart() || !(x.tally.attempts > x.tpl.attempt && x.out.wroteHeader)) {
			x.out.hold(p)
		}
		if ev != 0 { // progress, usage: the upstream is working
			s.step, fed = chk.Progress(at, false), true
		}
	}
	if !fed {
		s.step = chk.Tick(at)
	}
	if s.step.Failed {
		return false
	}
	x.out.release(s.step.Release)
	x.out.noteHeld()
	x.out.own() // chunks still pending must outlive the stream reader's buffer
	return true
}

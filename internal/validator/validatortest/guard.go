package validatortest

import (
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Guard is a scripted background check, a stand-in for a guard model in
// lifecycle tests: every judgement it starts is sent on Calls, and the
// test answers it (or lets its deadline pass). It keeps the
// validator.Background contract the way the guard model's check does: a
// judgement has a deadline (Deadline after it started, and never later
// than Deadline after Close); at a Tick past it the judgement is given
// up, releasing the text unjudged when FailOpen, else with a
// guard_unavailable finding. It reads no clock: its time is the last
// Tick's.
type Guard struct {
	// Deadline bounds every judgement (default 2s).
	Deadline time.Duration
	// FailOpen releases text whose judgement timed out.
	FailOpen bool
	// Cadence asks for a judgement every this many bytes while the output
	// streams; 0 asks only once the output is complete (a guard that only
	// warms its cache while the output streams).
	Cadence int
	// Calls receives every judgement started.
	Calls chan *Call

	mu       sync.Mutex
	buf      []byte
	asked    int
	settled  int
	findings []validator.Finding
	closed   bool
	closedAt time.Time
	done     bool
	now      time.Time
	inflight *Call
	notify   func()
}

// Call is one judgement the Guard asked for: of Text, the output up to End.
type Call struct {
	End      int
	Final    bool
	Text     string
	Started  time.Time
	Deadline time.Time
	g        *Guard
}

// NewGuard returns a scripted guard with room for 64 unanswered calls.
func NewGuard(deadline time.Duration, failOpen bool, cadence int) *Guard {
	if deadline <= 0 {
		deadline = 2 * time.Second
	}
	return &Guard{Deadline: deadline, FailOpen: failOpen, Cadence: cadence, Calls: make(chan *Call, 64)}
}

func (g *Guard) Name() string { return "guard_llm" }

func (g *Guard) Write(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.buf = append(g.buf, p...)
	g.maybeStartLocked()
	return len(p), nil
}

func (g *Guard) maybeStartLocked() {
	if !g.closed && len(g.findings) == 0 && g.inflight == nil && g.Cadence > 0 && len(g.buf)-g.asked >= g.Cadence {
		g.startLocked(false)
	}
}

func (g *Guard) startLocked(final bool) {
	c := &Call{End: len(g.buf), Final: final, Text: string(g.buf), Started: g.now, Deadline: g.now.Add(g.Deadline), g: g}
	if g.closed && c.Deadline.After(g.closedAt.Add(g.Deadline)) {
		c.Deadline = g.closedAt.Add(g.Deadline)
	}
	g.asked = c.End
	if !g.now.Before(c.Deadline) {
		g.giveUpLocked(c)
		return
	}
	g.inflight = c
	g.Calls <- c
}

// Pass answers the call: its text is safe.
func (c *Call) Pass() { c.g.answer(c, false) }

// Fail answers the call: its text is unsafe (unsafe_content).
func (c *Call) Fail() { c.g.answer(c, true) }

func (g *Guard) answer(c *Call, fail bool) {
	g.mu.Lock()
	if g.inflight != c {
		g.mu.Unlock()
		return
	}
	g.inflight = nil
	if fail {
		g.findings = append(g.findings, validator.Finding{Check: g.Name(), Reason: validator.ReasonUnsafeContent,
			Start: g.settled, End: max(c.End, g.settled+1), Message: "scripted guard says unsafe"})
	} else {
		g.settled = max(g.settled, c.End)
	}
	g.afterLocked()
	f := g.notify
	g.mu.Unlock()
	if f != nil {
		f()
	}
}

// afterLocked starts what follows a judgement: the final one after
// Close, or one on the text that came while the guard was busy.
func (g *Guard) afterLocked() {
	switch {
	case !g.closed:
		g.maybeStartLocked()
	case len(g.findings) > 0 || g.settled >= len(g.buf):
		g.done = true
	case g.inflight == nil:
		g.startLocked(true)
	}
}

func (g *Guard) giveUpLocked(c *Call) {
	if g.FailOpen {
		g.settled = max(g.settled, c.End)
	} else {
		g.findings = append(g.findings, validator.Finding{Check: g.Name(), Reason: validator.ReasonGuardUnavailable,
			Start: g.settled, End: max(c.End, g.settled+1), Message: "scripted guard gave no verdict in time"})
	}
	if g.closed && (len(g.findings) > 0 || g.settled >= len(g.buf) || c.Final) {
		g.done = true
	}
}

func (g *Guard) Settled() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.settled
}

func (g *Guard) Findings() []validator.Finding {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]validator.Finding(nil), g.findings...)
}

func (g *Guard) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed, g.closedAt = true, g.now
	if g.inflight == nil {
		g.afterLocked()
	}
}

func (g *Guard) Tick(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if now.After(g.now) {
		g.now = now
	}
	c := g.inflight
	if c == nil || now.Before(c.Deadline) {
		return
	}
	g.inflight = nil
	g.giveUpLocked(c)
	if !g.done {
		g.afterLocked()
	}
}

func (g *Guard) NextDeadline() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inflight == nil {
		return time.Time{}
	}
	return g.inflight.Deadline
}

func (g *Guard) Notify(f func()) {
	g.mu.Lock()
	g.notify = f
	g.mu.Unlock()
}

func (g *Guard) Done() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.done
}

// Stop abandons the call in flight; the scripted guard has no goroutine.
func (g *Guard) Stop() {
	g.mu.Lock()
	g.inflight = nil
	g.mu.Unlock()
}

var (
	_ validator.Validator  = (*Guard)(nil)
	_ validator.Ticker     = (*Guard)(nil)
	_ validator.Background = (*Guard)(nil)
)

package validatortest

import (
	"context"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Guard is the guard model's check (guard_llm) with a scripted judge, for
// lifecycle tests: the check's own state machine (when it asks, the
// deadlines, what it settles, its findings) runs unchanged, and every
// verdict it asks for is sent on Calls for the test to answer (or to let
// its deadline pass). Cache-warming prefills are answered at once. The
// guard reads no clock: its time is the last Tick's.
type Guard struct {
	*llm.Guard
	// Calls receives every verdict the guard asks for.
	Calls chan *Call

	mu     sync.Mutex
	closed bool
	notify func()
	woke   chan struct{}
}

// Call is one verdict the Guard asked for: of Text, the output up to End.
type Call struct {
	End   int
	Final bool // asked after the end of the output
	Text  string

	ctx    context.Context
	answer chan *llm.Result
	g      *Guard
}

// NewGuard returns the guard_llm check with a scripted judge and room for
// 64 unanswered calls. A judgement has deadline (default 2s); text the
// guard could not judge in time is let go with a guard_unavailable note
// when failOpen, else failed with a guard_unavailable finding (in a
// pipeline, the policy's rule for guard_unavailable sets failOpen). It
// asks for a verdict every cadence bytes while the output streams (and at
// a sentence end after half of it); 0 asks only once the output is
// complete.
func NewGuard(deadline time.Duration, failOpen bool, cadence int) *Guard {
	g := &Guard{Calls: make(chan *Call, 64), woke: make(chan struct{}, 1)}
	cfg := llm.Config{Deadline: deadline, FailOpen: failOpen, Schedule: "fixed", Protocol: "verdict-json",
		CadenceTokens: (cadence + 3) / 4, PrefillOnly: cadence <= 0}
	lg, err := llm.NewWithJudge(cfg, nil, nil, judge{g})
	if err != nil {
		panic("validatortest: " + err.Error()) // the configuration above is valid
	}
	g.Guard = lg
	lg.Notify(g.wake)
	return g
}

// judge sends the guard's verdict calls to the test.
type judge struct{ g *Guard }

func (j judge) Judge(ctx context.Context, jm llm.Judgement) (*llm.Result, error) {
	if jm.Prefill {
		return nil, nil
	}
	j.g.mu.Lock()
	final := j.g.closed
	j.g.mu.Unlock()
	c := &Call{End: len(jm.Text), Final: final, Text: jm.Text, ctx: ctx, answer: make(chan *llm.Result, 1), g: j.g}
	j.g.Calls <- c
	select {
	case res := <-c.answer:
		return res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Pass answers the call: its text is safe. It returns once the guard has
// taken the answer in (or given the call up).
func (c *Call) Pass() { c.reply(validator.Pass, "") }

// Fail answers the call: its text is unsafe (unsafe_content). It returns
// once the guard has taken the answer in (or given the call up).
func (c *Call) Fail() { c.reply(validator.Fail, validator.ReasonUnsafeContent) }

func (c *Call) reply(v validator.Outcome, reason validator.Reason) {
	select { // a wake from before this answer (a prefill's) is not its
	case <-c.g.woke:
	default:
	}
	c.answer <- &llm.Result{Verdict: &validator.Verdict{Verdict: v, Reason: reason}}
	select {
	case <-c.g.woke:
	case <-c.ctx.Done():
	}
}

// Notify sets the function called after a background call changed the
// guard's state.
func (g *Guard) Notify(f func()) {
	g.mu.Lock()
	g.notify = f
	g.mu.Unlock()
}

func (g *Guard) wake() {
	g.mu.Lock()
	f := g.notify
	g.mu.Unlock()
	if f != nil {
		f()
	}
	select {
	case g.woke <- struct{}{}:
	default:
	}
}

// Close marks the end of the output.
func (g *Guard) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.Guard.Close()
}

var (
	_ validator.Validator  = (*Guard)(nil)
	_ validator.Ticker     = (*Guard)(nil)
	_ validator.Background = (*Guard)(nil)
)

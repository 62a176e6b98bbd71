package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Defaults of the work probe (Gateway.WorkProbe, Gateway.MaxPromptWait).
const (
	DefaultWorkProbe     = 5 * time.Second
	DefaultMaxPromptWait = 10 * time.Minute
	// workProbeTimeout bounds one question to the upstream.
	workProbeTimeout = 2 * time.Second
)

// workWatch asks the upstream, until the attempt's first upstream event,
// whether it is working on a prompt (upstream.Work: llama-server's
// /slots, Ollama's /api/ps). Each answer that says it is counts as
// progress on the prompt, as llama-server's prompt-progress events do:
// the stall check's ttft then runs from it, and so does the idle timer.
// An answer that says it is not, or a question that fails, counts for
// nothing: ttft runs on from the last progress and its finding says what
// the upstream answered. Answers stop counting MaxPromptWait after the
// attempt began.
type workWatch struct {
	every, max time.Duration
	start      time.Time
	t          clock.Timer
	answers    chan workAnswer // one question at a time: never blocks
	asking     bool
	stopped    bool
	at         time.Time // the last answer that reported work
	note       string    // what the last answer that did not said
	asked      int       // answers taken (tests wait on it)
}

type workAnswer struct {
	w   upstream.Work
	err error
}

// startWork starts the watch for an attempt whose upstream can report
// its work; nil when it cannot or the probe is off.
func (x *exchange) startWork(clk clock.Clock, now time.Time) *workWatch {
	every := x.g.workProbe()
	if every <= 0 || x.up.Kind != upstream.KindLlamaServer && x.up.Kind != upstream.KindOllama {
		return nil
	}
	return &workWatch{every: every, max: x.g.maxPromptWait(), start: now, t: clk.NewTimer(every), answers: make(chan workAnswer, 1)}
}

func (g *Gateway) workProbe() time.Duration {
	if g.WorkProbe == 0 {
		return DefaultWorkProbe
	}
	return g.WorkProbe
}

func (g *Gateway) maxPromptWait() time.Duration {
	if g.MaxPromptWait == 0 {
		return DefaultMaxPromptWait
	}
	return g.MaxPromptWait
}

// timer is the channel of the next question; nil when none is due.
func (w *workWatch) timer() <-chan time.Time {
	if w == nil || w.stopped || w.asking {
		return nil
	}
	return w.t.C()
}

// answer is the channel of the question in flight; nil when none is.
func (w *workWatch) answer() <-chan workAnswer {
	if w == nil || !w.asking {
		return nil
	}
	return w.answers
}

// answered is the number of answers taken.
func (w *workWatch) answered() int {
	if w == nil {
		return 0
	}
	return w.asked
}

func (w *workWatch) stop() {
	if w != nil && !w.stopped {
		w.stopped = true
		w.t.Stop()
	}
}

// onWorkDue asks the upstream, on its own goroutine, unless the attempt
// has heard from it already.
func (l *attemptLoop) onWorkDue() (pipeline.Step, *result) {
	w := l.work
	if l.rd.taken() > 0 || l.closed {
		w.stop()
		return l.onTick()
	}
	w.asking = true
	ctx, up, model, answers := l.ctx, l.x.up, l.x.req.model, w.answers
	go func() {
		ctx, cancel := context.WithTimeout(ctx, workProbeTimeout)
		defer cancel()
		wk, err := up.Work(ctx, model)
		answers <- workAnswer{wk, err}
	}()
	return l.onTick()
}

// onWorkAnswer takes the upstream's answer: work on a prompt is progress.
func (l *attemptLoop) onWorkAnswer(a workAnswer) (pipeline.Step, *result) {
	w := l.work
	w.asking = false
	w.asked++
	now := l.rd.now()
	if l.rd.taken() > 0 || l.closed {
		w.stop()
		return l.onTick()
	}
	w.t.Reset(w.every)
	switch {
	case errors.Is(a.err, upstream.ErrNoWorkReport):
		w.note = a.err.Error()
		w.stop()
	case a.err != nil:
		w.note = "asking the upstream whether it works on the prompt: " + a.err.Error()
	case !a.w.Working:
		w.note = a.w.Detail
	case now.Sub(w.start) >= w.max:
		w.note = "the upstream still reported work after " + w.max.String() + " (" + a.w.Detail + ")"
		w.stop()
	default:
		w.note, w.at = "", now
		step := l.chk.Progress(now, false)
		if step.State != pipeline.Done && !l.closed && l.idle > 0 {
			l.idleT.Reset(l.idle)
		}
		return step, nil
	}
	return l.onTick()
}

// lastSign is when the upstream last showed it was alive: its last
// payload, or the last answer that reported work on the prompt.
func (l *attemptLoop) lastSign() time.Time {
	last := l.rd.lastArrival()
	if l.work != nil && l.work.at.After(last) {
		return l.work.at
	}
	return last
}

// explainStall adds to a stall before the first event what the upstream
// answered when asked whether it worked on the prompt.
func (l *attemptLoop) explainStall(r result) result {
	if l.work == nil || l.work.note == "" || r.kind != resFail || r.verdict.Reason != validator.ReasonStall {
		return r
	}
	fs := append([]validator.Finding(nil), r.verdict.Findings...)
	for i, f := range fs {
		if f.Reason == validator.ReasonStall {
			fs[i].Message += "; " + l.work.note
		}
	}
	r.verdict.Findings = fs
	return r
}

package pipeline

import (
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Reasoning is output: the model's reasoning (reasoning_content, Ollama's
// thinking, a <think> section) is fed with FeedReasoning into the same
// text as the answer, under the same release point, and every check
// reads it, except the checks of the answer's form (Spec.AnswerOnly: JSON,
// length, format instructions), which see the answer alone. Findings in
// reasoning are located at "reasoning" in their Path.

// span is a range [start, end) of the fed output.
type span struct{ start, end int }

// FeedReasoning feeds a piece of the model's reasoning arriving at at.
func (a *Attempt) FeedReasoning(p []byte, at time.Time) Step {
	if len(p) == 0 || a.closed {
		return a.Feed(nil, at)
	}
	start := a.fed
	if n := len(a.reasoning); n > 0 && a.reasoning[n-1].end == start {
		a.reasoning[n-1].end += len(p)
	} else {
		a.reasoning = append(a.reasoning, span{start, start + len(p)})
	}
	a.feeding = true
	defer func() { a.feeding = false }()
	return a.Feed(p, at)
}

// inReasoning reports whether offset o of the output is reasoning.
func (a *Attempt) inReasoning(o int) bool {
	for _, s := range a.reasoning {
		if o >= s.start && o < s.end {
			return true
		}
	}
	return false
}

// locateReasoning puts "reasoning" in front of the Path of the findings
// that start in reasoning.
func (a *Attempt) locateReasoning(fs []validator.Finding) {
	if len(a.reasoning) == 0 {
		return
	}
	for i := range fs {
		if f := &fs[i]; a.inReasoning(f.Start) {
			if f.Path == "" {
				f.Path = "reasoning"
			} else {
				f.Path = "reasoning/" + f.Path
			}
		}
	}
}

// answerOnly feeds a check of the answer's form the answer alone: the
// reasoning fed between is skipped, and its offsets (Settled, findings)
// are translated back to the output's.
type answerOnly struct {
	validator.Validator
	in    int    // bytes written to the check
	skips []skip // reasoning skipped, in order
	fs    []validator.Finding
}

// skip is n bytes of reasoning skipped before the check's byte at.
type skip struct{ at, n int }

func (w *answerOnly) Write(p []byte) (int, error) {
	w.in += len(p)
	return w.Validator.Write(p)
}

// skipReasoning records n bytes of reasoning the check does not see.
func (w *answerOnly) skipReasoning(n int) {
	if k := len(w.skips); k > 0 && w.skips[k-1].at == w.in {
		w.skips[k-1].n += n
		return
	}
	w.skips = append(w.skips, skip{w.in, n})
}

// outer is the output offset of the check's offset o: the reasoning
// skipped at or before it lies before it.
func (w *answerOnly) outer(o int) int {
	for _, s := range w.skips {
		if s.at > o {
			break
		}
		o += s.n
	}
	return o
}

func (w *answerOnly) Settled() int { return w.outer(w.Validator.Settled()) }

func (w *answerOnly) Findings() []validator.Finding {
	fs := w.Validator.Findings()
	if len(w.skips) == 0 || len(fs) == 0 {
		return fs
	}
	w.fs = append(w.fs[:0], fs...)
	for i := range w.fs {
		w.fs[i].Start, w.fs[i].End = w.outer(w.fs[i].Start), w.outer(w.fs[i].End)
	}
	return w.fs
}

// Progress tells the checks that watch liveness (the stall check) that
// the upstream made progress at at without text: output says it was a
// piece of the answer (a tool call's), else a sign of work before output
// (prompt progress, token counts). Then it ticks as Tick does.
func (a *Attempt) Progress(at time.Time, output bool) Step {
	if !a.closed && (!a.failed || a.complete) {
		for _, w := range a.watchers {
			w.Progress(at, output)
		}
	}
	return a.Tick(at)
}

package llm

import (
	"fmt"
	"sync"
	"time"
)

// Schedule is when the guard is asked while the output streams.
type Schedule int

// The schedules.
const (
	// ScheduleAdaptive prefills the prompt's fixed part when the request
	// goes upstream, asks for the first verdict as soon as there is text,
	// and then keeps one call in flight: each call covers all the text that
	// came while the one before ran (so the guard never queues behind
	// itself and a superseded call is never sent), and is a verdict when
	// one is due by the guard's measured speed, else a prefill that keeps
	// the cached prompt at most one call behind the stream. The text left
	// to judge when the output ends is then what came during one call.
	ScheduleAdaptive Schedule = iota
	// ScheduleFixed asks every cadence_tokens tokens (or at a sentence end
	// after half of that) and prefills nothing ahead.
	ScheduleFixed
)

func (s Schedule) String() string {
	switch s {
	case ScheduleAdaptive:
		return "adaptive"
	case ScheduleFixed:
		return "fixed"
	}
	return fmt.Sprintf("Schedule(%d)", int(s))
}

// ParseSchedule parses adaptive (or "") and fixed.
func ParseSchedule(s string) (Schedule, error) {
	switch s {
	case "", "adaptive":
		return ScheduleAdaptive, nil
	case "fixed":
		return ScheduleFixed, nil
	}
	return 0, fmt.Errorf("unknown schedule %q (want adaptive or fixed)", s)
}

// speed is what a guard server's own timings say about it, shared by every
// guard call to that server: seconds per prompt token, per generated token,
// and per call beyond both (HTTP, scheduling, sampling). Exponentially
// weighted, so a server that slows down (a main model decoding beside it)
// is followed within a few calls.
type speed struct {
	mu       sync.Mutex
	prefill  float64
	decode   float64
	overhead float64
}

// speeds holds one speed per guard server (URL or NATS model).
var speeds sync.Map // string -> *speed

func speedOf(key string) *speed {
	v, _ := speeds.LoadOrStore(key, &speed{})
	return v.(*speed)
}

const ewma = 0.3

func blend(old, x float64) float64 {
	if old == 0 {
		return x
	}
	return old + ewma*(x-old)
}

// observe takes in one call's counts and times.
func (s *speed) observe(r *Result) {
	if r == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.PromptTokens >= 4 && r.PromptTime > 0 {
		s.prefill = blend(s.prefill, r.PromptTime.Seconds()/float64(r.PromptTokens))
	}
	if r.Predicted >= 1 && r.PredictTime > 0 {
		s.decode = blend(s.decode, r.PredictTime.Seconds()/float64(r.Predicted))
	}
	if r.Elapsed > 0 && (r.PromptTime > 0 || r.PredictTime > 0) {
		s.overhead = blend(s.overhead, max(0, (r.Elapsed-r.PromptTime-r.PredictTime).Seconds()))
	}
}

// Defaults before a server has been measured: a small CPU guard.
const (
	defaultDecodeStep = 25 * time.Millisecond
	minVerdictEvery   = 30 * time.Millisecond
	maxVerdictEvery   = time.Second
	// verdictShare is how many decode steps of prefill a verdict's step
	// is spread over: about a quarter of the guard's time goes to verdict
	// steps, the rest to keeping the prompt cached.
	verdictShare = 4
)

// step is the fixed cost of one verdict: a decode step and the call's
// overhead.
func (s *speed) step() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.decode == 0 {
		return defaultDecodeStep
	}
	return time.Duration((s.decode + s.overhead) * float64(time.Second))
}

// verdictEvery is how often a verdict is asked for while the output
// streams.
func (s *speed) verdictEvery() time.Duration {
	return min(max(verdictShare*s.step(), minVerdictEvery), maxVerdictEvery)
}

// minPrefillBytes is the least new text worth a prefill call: enough that
// its prefill takes as long as the call's overhead (a token at least).
func (s *speed) minPrefillBytes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	const bytesPerToken = 4
	tokens := 1.0
	if s.prefill > 0 && s.overhead > 0 {
		tokens = max(1, s.overhead/s.prefill)
	}
	return int(tokens * bytesPerToken)
}

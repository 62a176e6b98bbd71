package llm

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/guard/standin"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// scheduled drives a guard with schedule adaptive against the stand-in on
// a fake clock: each call is answered when the test moves the clock past
// the stand-in's work for it.
type scheduled struct {
	t    *testing.T
	fk   *clock.Fake
	s    *standin.Server
	g    *Guard
	woke chan struct{}
}

func newScheduled(t *testing.T, cfg Config, req *validator.Request) *scheduled {
	t.Helper()
	fk := clock.NewFake(time.Unix(7000, 0))
	s := standin.New(standin.Config{PrefillTPS: 600, DecodeTPS: 50, Clock: fk})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	cfg.URL, cfg.Protocol = srv.URL, "verdict-json"
	g, err := New(cfg, req, fk)
	if err != nil {
		t.Fatal(err)
	}
	sc := &scheduled{t: t, fk: fk, s: s, g: g, woke: make(chan struct{}, 64)}
	g.Notify(func() { sc.woke <- struct{}{} })
	t.Cleanup(g.Stop)
	return sc
}

// run does f, which must make the guard send one call, and finishes that
// call on the stand-in's time; it returns the task.
func (sc *scheduled) run(f func()) standin.Task {
	sc.t.Helper()
	armed := sc.fk.Armed()
	n := len(sc.s.Tasks())
	f()
	select {
	case <-armed:
	case <-time.After(30 * time.Second): // a hang, not a timing assertion
		sc.t.Fatal("the guard sent no call")
	}
	next, _ := sc.fk.Next()
	sc.fk.Set(next)
	select {
	case <-sc.woke:
	case <-time.After(30 * time.Second): // a hang, not a timing assertion
		sc.t.Fatal("the call's answer never reached the guard")
	}
	ts := sc.s.Tasks()
	if len(ts) != n+1 {
		sc.t.Fatalf("%d new tasks, want 1", len(ts)-n)
	}
	return ts[n]
}

// TestAdaptiveSchedule: the fixed part of the prompt is prefilled at
// Start; the first verdict is asked for with the first text; text that
// comes before the next verdict is due is prefilled (a call covering all
// of it); a verdict falls due by the guard's measured decode step, even
// with no new text; the end needs only the text since the last call.
func TestAdaptiveSchedule(t *testing.T) {
	sc := newScheduled(t, Config{Deadline: time.Minute}, nil)
	g := sc.g
	fixed := sc.run(g.Start)
	if fixed.NPredict != 0 || fixed.Prompt != BuildPrompt(TaskSafety, "", "").Prefix {
		t.Fatalf("Start sent %+v, want a prefill of the fixed part", fixed)
	}
	first := sc.run(func() { g.Tick(sc.fk.Now()); g.Write([]byte("Hello there.")) })
	if first.NPredict != 1 || first.CacheN == 0 {
		t.Fatalf("first text: %+v, want a verdict on the cached fixed part", first)
	}
	if g.Settled() != len("Hello there.") {
		t.Fatalf("settled %d after the first verdict", g.Settled())
	}
	// New text right away: not yet a verdict's time, so a prefill.
	pre := sc.run(func() { g.Tick(sc.fk.Now()); g.Write([]byte(" The river bends past the mill.")) })
	if pre.NPredict != 0 || !strings.HasSuffix(pre.Prompt, `the mill.`) {
		t.Fatalf("text before the verdict is due: %+v, want a prefill of it", pre)
	}
	if g.Settled() != len("Hello there.") {
		t.Errorf("a prefill settled text: %d", g.Settled())
	}
	// The next verdict falls due verdictEvery after the last one started,
	// by the decode step measured from the stand-in's timings (20 ms).
	every := g.speed.verdictEvery()
	if every < 4*20*time.Millisecond || every > 200*time.Millisecond {
		t.Errorf("verdict every %v from a 20 ms decode step", every)
	}
	sc.run(func() { g.Write([]byte(" Then the road.")) }) // a prefill again
	due := g.NextDeadline()
	if due.IsZero() {
		t.Fatal("no deadline for the next verdict with text waiting")
	}
	v := sc.run(func() { sc.fk.Set(due); g.Tick(due) })
	if v.NPredict != 1 || v.PromptN > 12 {
		t.Fatalf("due verdict %+v, want one over the suffix only (the text is prefilled)", v)
	}
	if g.Settled() != len("Hello there. The river bends past the mill. Then the road.") {
		t.Errorf("settled %d", g.Settled())
	}
	sc.run(func() { g.Write([]byte(" The end.")) }) // prefilled as it comes
	last := sc.run(g.Close)
	if last.NPredict != 1 || last.PromptN > 12 || !g.Done() || g.Settled() != len("Hello there. The river bends past the mill. Then the road. The end.") {
		t.Fatalf("final %+v done %v settled %d", last, g.Done(), g.Settled())
	}
}

// TestAdaptiveFailOneStep: a failing verdict-json answer costs one decode
// step (the reason is the task's, the risk P(fail)'s tier) and its message
// says what the probability is of.
func TestAdaptiveFailOneStep(t *testing.T) {
	sc := newScheduled(t, Config{Deadline: time.Minute}, nil)
	sc.run(sc.g.Start)
	task := sc.run(func() { sc.g.Tick(sc.fk.Now()); sc.g.Write([]byte("UNSAFE text")) })
	if task.NPredict != 1 || task.Content != "fail" {
		t.Fatalf("task %+v", task)
	}
	fs := sc.g.Findings()
	if len(fs) != 1 || fs[0].Reason != validator.ReasonUnsafeContent || len(sc.s.Tasks()) != 2 {
		t.Fatalf("findings %+v after %d tasks", fs, len(sc.s.Tasks()))
	}
	if !strings.Contains(fs[0].Message, `probability of "fail" over "pass"`) {
		t.Errorf("message %q does not say what its number is", fs[0].Message)
	}
}

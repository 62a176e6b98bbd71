package pipeline

import (
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

var t0 = time.Unix(1000, 0)

func guardPolicy(t *testing.T, doc string) *policy.Policy {
	t.Helper()
	p, _ := testPolicy(t, "checks: {word: false}\n"+doc)
	return p
}

// nextCall returns the call the guard started (its judge runs in the
// background); the test's -timeout bounds a guard never asked.
func nextCall(t *testing.T, g *validatortest.Guard) *validatortest.Call {
	t.Helper()
	select {
	case c := <-g.Calls:
		return c
	case <-t.Context().Done():
		t.Fatal("the guard was not asked")
		return nil
	}
}

// TestLateFailHalts: a guard "fail" that arrives after the last token
// fails the attempt, whether the guard judged the text while it streamed
// (cadence) or only at the end (warm prefill).
func TestLateFailHalts(t *testing.T) {
	const text = "first sentence. second sentence."
	for _, tc := range []struct {
		name    string
		cadence int
		cleared int // what the guard passed while the text streamed
	}{
		{"verdict only at the end", 0, 0},
		{"verdicts while streaming", 16, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := validatortest.NewGuard(2*time.Second, false, tc.cadence)
			a, err := New(withVals(guardPolicy(t, ""), g), &validator.Request{}, Options{Clock: clock.NewFake(t0)})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Stop()
			a.Feed([]byte(text[:16]), t0)
			if tc.cadence > 0 {
				nextCall(t, g).Pass()
			}
			st := a.Feed([]byte(text[16:]), t0)
			if st.Release != tc.cleared {
				t.Fatalf("released %d before the verdict, want %d", st.Release, tc.cleared)
			}
			st = a.CloseAt(t0)
			if st.State != Closing || st.Release != tc.cleared {
				t.Fatalf("after the last token: %+v, want closing with %d released", st, tc.cleared)
			}
			c := nextCall(t, g)
			if !c.Final && tc.cadence == 0 {
				t.Fatalf("call %+v is not the final one", c)
			}
			c.Fail()
			select {
			case <-a.Notify():
			default:
				t.Fatal("the verdict did not wake the attempt")
			}
			st = a.Tick(t0.Add(300 * time.Millisecond))
			if st.State != Done || !st.Failed || st.Release != tc.cleared {
				t.Fatalf("after a late fail: %+v", st)
			}
			if v := a.Verdict(1); v.Reason != validator.ReasonUnsafeContent || v.Action != validator.ActionHalt {
				t.Fatalf("verdict %+v", v)
			}
		})
	}
}

// TestGuardPastDeadline: a guard that never answers is given up at its
// deadline, counted from the last token however long the calls before
// took. The policy's rule for guard_unavailable alone decides what
// happens to the text it could not judge, and the guard follows it:
// release (the default) lets everything go, halt fails with
// guard_unavailable. Neither is a stall.
func TestGuardPastDeadline(t *testing.T) {
	const d = 2 * time.Second
	for _, open := range []bool{true, false} {
		doc := "" // guard_unavailable: release
		if !open {
			doc = "actions: {guard_unavailable: {action: halt, risk: medium}}"
		}
		p := guardPolicy(t, doc)
		// The guard fails open exactly when the rule releases, as the
		// pipeline tells a guard through validator.Request.Unjudged.
		release := p.Rule(validator.ReasonGuardUnavailable).Action == validator.ActionRelease
		if release != open {
			t.Fatalf("policy %q: guard_unavailable releases = %v", doc, release)
		}
		g := validatortest.NewGuard(d, release, 8)
		a, err := New(withVals(p, g), &validator.Request{}, Options{Clock: clock.NewFake(t0)})
		if err != nil {
			t.Fatal(err)
		}
		a.Feed([]byte("0123456789"), t0) // starts a call that never answers
		end := t0.Add(1500 * time.Millisecond)
		a.Feed([]byte("abcdef"), end)
		st := a.CloseAt(end)
		if st.State != Closing || !st.Wake.Equal(t0.Add(d)) {
			t.Fatalf("open=%v: %+v, want closing until the first call's deadline", open, st)
		}
		st = a.Tick(st.Wake)
		if open {
			// The first call released its text; the final one has until
			// the deadline of the end.
			if st.State != Closing || !st.Wake.Equal(end.Add(d)) || st.Release != 10 {
				t.Fatalf("open: after the first deadline %+v", st)
			}
			st = a.Tick(st.Wake)
			if st.State != Done || st.Failed || st.Release != 16 {
				t.Fatalf("open: %+v, want everything released", st)
			}
			continue
		}
		if st.State != Done || !st.Failed || st.Release != 0 {
			t.Fatalf("closed: %+v", st)
		}
		if v := a.Verdict(1); v.Reason != validator.ReasonGuardUnavailable || v.Action != validator.ActionHalt {
			t.Fatalf("closed: verdict %+v", v)
		}
	}
}

// TestMaxHold: in watermark mode a guard may hold text at most max_hold;
// then the text goes out with a guard_unavailable note, or the attempt
// halts when the policy fails closed. The verdict is still awaited.
func TestMaxHold(t *testing.T) {
	for _, closed := range []bool{false, true} {
		doc := "release: watermark\nmax_hold: 500ms\n"
		if closed {
			doc += "actions: {guard_unavailable: {action: halt, risk: medium}}\n"
		}
		g := validatortest.NewGuard(10*time.Second, false, 4)
		a, err := New(withVals(guardPolicy(t, doc), g), &validator.Request{}, Options{Clock: clock.NewFake(t0)})
		if err != nil {
			t.Fatal(err)
		}
		st := a.Feed([]byte("held text"), t0)
		if st.Release != 0 || !st.Wake.Equal(t0.Add(500*time.Millisecond)) {
			t.Fatalf("closed=%v: %+v, want held until max_hold", closed, st)
		}
		st = a.Tick(t0.Add(499 * time.Millisecond))
		if st.Release != 0 {
			t.Fatalf("released before max_hold: %+v", st)
		}
		st = a.Tick(t0.Add(500 * time.Millisecond))
		if closed {
			if !st.Failed || st.Release != 0 || a.Verdict(1).Reason != validator.ReasonGuardUnavailable {
				t.Fatalf("fail closed: %+v %+v", st, a.Verdict(1))
			}
			continue
		}
		if st.Failed || st.Release != len("held text") || st.State != Feeding {
			t.Fatalf("fail open: %+v", st)
		}
		// The guard's own verdict still joins: a late fail fails the attempt.
		st = a.CloseAt(t0.Add(time.Second))
		if st.State != Closing {
			t.Fatalf("closed without the verdict: %+v", st)
		}
		nextCall(t, g).Fail()
		if st = a.Tick(t0.Add(time.Second)); !st.Failed || st.State != Done {
			t.Fatalf("late fail after max_hold: %+v", st)
		}
	}
}

// TestOptimisticLateFail: optimistic mode releases at once; a late guard
// failure still fails the attempt (the gateway turns it into an in-band
// error and an incident).
func TestOptimisticLateFail(t *testing.T) {
	g := validatortest.NewGuard(time.Second, false, 0)
	a, err := New(withVals(guardPolicy(t, "release: optimistic"), g), &validator.Request{}, Options{Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatal(err)
	}
	if st := a.Feed([]byte("out at once"), t0); st.Release != len("out at once") {
		t.Fatalf("optimistic held text: %+v", st)
	}
	a.CloseAt(t0)
	nextCall(t, g).Fail()
	st := a.Tick(t0)
	if !st.Failed || st.State != Done || st.Release != len("out at once") {
		t.Fatalf("%+v", st)
	}
}

// TestCheckCaseWaitsForGuard: aegis check joins the guard's verdict.
func TestCheckCaseWaitsForGuard(t *testing.T) {
	for _, fail := range []bool{false, true} {
		reg := &validator.Registry{}
		guards := make(chan *validatortest.Guard, 1)
		reg.Register(validator.Spec{Name: "script_guard", New: func(any, *validator.Request) (validator.Validator, error) {
			g := validatortest.NewGuard(time.Minute, false, 0)
			guards <- g
			return g, nil
		}})
		p, err := policy.Parse([]byte("checks: {script_guard: true}"), "test", reg)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c := <-(<-guards).Calls
			if fail {
				c.Fail()
			} else {
				c.Pass()
			}
		}()
		v, err := CheckCase(p, &Case{Output: "some output"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]validator.Outcome{false: validator.Pass, true: validator.Fail}[fail]; v.Verdict != want {
			t.Fatalf("fail=%v: verdict %+v", fail, v)
		}
	}
}

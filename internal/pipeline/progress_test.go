package pipeline

import (
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/stall"
)

// TestProgressKeepsStallAway: pieces of output that are not text (a tool
// call's) and signs of work before output restart the stall check's
// clocks; silence past a deadline still stalls.
func TestProgressKeepsStallAway(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name   string
		events []int // seconds; negative: a sign of work, else output
		end    int
		stall  bool
	}{
		{"tool pieces 8 s apart", []int{8, 16, 24, 32, 40, 48}, 50, false},
		{"tool pieces then silence", []int{8, 16}, 32, true},
		{"prompt progress 20 s apart", []int{-20, -40, -60, -80}, 90, false},
		{"no progress", nil, 31, true},
		{"progress then silence past ttft", []int{-20}, 51, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := &validator.Registry{}
			stall.Register(reg)
			p, err := policy.Parse([]byte("checks: {stall: {ttft: 30s, gap: 15s}}\n"), "p", reg)
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(p, &validator.Request{}, Options{Registry: reg, Clock: clock.NewFake(t0)})
			if err != nil {
				t.Fatal(err)
			}
			a.Tick(at(0))
			for _, e := range tc.events {
				if e < 0 {
					a.Progress(at(-e), false)
				} else {
					a.Progress(at(e), true)
				}
			}
			st := a.Tick(at(tc.end))
			if st.Failed != tc.stall {
				t.Fatalf("failed = %v, want %v (%v)", st.Failed, tc.stall, a.Findings())
			}
		})
	}
}

// TestCarriedTextIsNoOutput: a retry feeds its fresh checks the text an
// earlier attempt released (text and reasoning); marked with Carry, that
// text is not the new upstream's first token, so a long prefill before
// the retry's first token is judged by ttft, not by the gap.
func TestCarriedTextIsNoOutput(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name  string
		carry bool
		first int // the retry's first token, seconds after it started; 0: none
		end   int
		stall bool
	}{
		{"carried, first token after a 20 s prefill", true, 20, 34, false},
		{"carried, prefill past ttft", true, 0, 31, true},
		{"carried, silence after the first token", true, 20, 36, true},
		{"not carried: the replay counts as output", false, 0, 16, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := &validator.Registry{}
			stall.Register(reg)
			p, err := policy.Parse([]byte("checks: {stall: {ttft: 30s, gap: 15s}}\n"), "p", reg)
			if err != nil {
				t.Fatal(err)
			}
			a, err := New(p, &validator.Request{}, Options{Registry: reg, Clock: clock.NewFake(t0)})
			if err != nil {
				t.Fatal(err)
			}
			if tc.carry {
				a.Carry(len("I think.") + len("Once upon"))
			}
			a.FeedReasoning([]byte("I think."), at(0))
			a.Feed([]byte("Once upon"), at(0))
			if tc.first > 0 {
				a.Feed([]byte(" a time"), at(tc.first))
			}
			st := a.Tick(at(tc.end))
			if st.Failed != tc.stall {
				t.Fatalf("failed = %v, want %v (%v)", st.Failed, tc.stall, a.Findings())
			}
		})
	}
}

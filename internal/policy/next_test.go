package policy

import (
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

func TestNext(t *testing.T) {
	v := func(r validator.Reason, a validator.Action) validator.Verdict {
		return validator.Verdict{Verdict: validator.Fail, Reason: r, Action: a}
	}
	loop := v(validator.ReasonRepetitionLoop, validator.ActionRetryWithCorrection)
	stall := v(validator.ReasonStall, validator.ActionRetryWithCorrection)
	broken := v(validator.ReasonInvalidJSON, validator.ActionFixSyntax)
	broken.Findings = []validator.Finding{{Reason: validator.ReasonInvalidJSON, Hint: validator.ActionFixSyntax}}
	unhinted := v(validator.ReasonInvalidJSON, validator.ActionRetryStricterFormat)
	unhinted.Findings = []validator.Finding{{Reason: validator.ReasonInvalidJSON}}
	first := SoFar{Attempts: 1, MaxAttempts: 4}
	with := func(f func(*SoFar)) SoFar { s := first; f(&s); return s }
	for _, tc := range []struct {
		name string
		v    validator.Verdict
		s    SoFar
		want Move
	}{
		{"pass", validator.Verdict{Verdict: validator.Pass}, first, Release},
		{"pass with notes", validator.Verdict{Verdict: validator.Pass, Findings: []validator.Finding{{Reason: validator.ReasonGuardUnavailable}}}, first, Release},
		{"halt action", v(validator.ReasonSecretLeak, validator.ActionHalt), first, Halt},
		{"retry", loop, first, Retry},
		{"fix syntax repairs locally first", broken, first, FixSyntax},
		{"fix syntax is a retry once tried", broken, with(func(s *SoFar) { s.FixTried = true }), Retry},
		{"no local repair after text went out", broken, with(func(s *SoFar) { s.Sent = true }), Retry},
		{"no local repair of tool calls", broken, with(func(s *SoFar) { s.ToolCalls = true }), Retry},
		{"no local repair without the hint", unhinted, first, Retry},
		{"attempts spent", loop, with(func(s *SoFar) { s.Attempts = 4 }), Halt},
		{"cut short by max_tokens", unhinted, with(func(s *SoFar) { s.CutShort = true }), Halt},
		{"optimistic text out", loop, with(func(s *SoFar) { s.Optimistic, s.Sent = true, true }), Halt},
		{"optimistic, nothing out yet", loop, with(func(s *SoFar) { s.Optimistic = true }), Retry},
		{"late guard fail after optimistic release", v(validator.ReasonUnsafeContent, validator.ActionHalt), with(func(s *SoFar) { s.Optimistic, s.Sent = true, true }), Halt},
		{"first stall probes", stall, first, Probe},
		{"second stall halts", stall, with(func(s *SoFar) { s.Attempts, s.StallRetried = 2, true }), Halt},
		{"memory cap", v(validator.ReasonLengthExceeded, validator.ActionRetryWithCorrection), with(func(s *SoFar) { s.Capped = true }), Halt},
		{"block", v(validator.ReasonPromptInjection, validator.ActionBlock), first, Halt},
		{"unjudged text under the fail-closed rule", v(validator.ReasonGuardUnavailable, validator.ActionHalt), first, Halt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Default().Next(tc.v, tc.s); got != tc.want {
				t.Errorf("Next = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestHalted(t *testing.T) {
	for _, tc := range []struct{ in, want validator.Action }{
		{validator.ActionRetryWithCorrection, validator.ActionHalt},
		{validator.ActionRelease, validator.ActionHalt},
		{validator.ActionBlock, validator.ActionBlock},
	} {
		if got := Halted(validator.Verdict{Action: tc.in}).Action; got != tc.want {
			t.Errorf("Halted(%s) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

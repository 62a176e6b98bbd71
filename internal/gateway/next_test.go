package gateway

import (
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

func TestDecideNext(t *testing.T) {
	v := func(r validator.Reason, a validator.Action) validator.Verdict {
		return validator.Verdict{Verdict: validator.Fail, Reason: r, Action: a}
	}
	loop := v(validator.ReasonRepetitionLoop, validator.ActionRetryWithCorrection)
	stall := v(validator.ReasonStall, validator.ActionRetryWithCorrection)
	for _, tc := range []struct {
		name string
		v    validator.Verdict
		s    sofar
		want next
	}{
		{"halt action", v(validator.ReasonSecretLeak, validator.ActionHalt), sofar{attempts: 1, maxAttempts: 4}, nextHalt},
		{"retry", loop, sofar{attempts: 1, maxAttempts: 4}, nextRetry},
		{"fix syntax is a retry", v(validator.ReasonInvalidJSON, validator.ActionFixSyntax), sofar{attempts: 1, maxAttempts: 4}, nextRetry},
		{"attempts spent", loop, sofar{attempts: 4, maxAttempts: 4}, nextHalt},
		{"optimistic text out", loop, sofar{attempts: 1, maxAttempts: 4, optimisticSent: true}, nextHalt},
		{"late guard fail after optimistic release", v(validator.ReasonUnsafeContent, validator.ActionHalt), sofar{attempts: 1, maxAttempts: 4, optimisticSent: true}, nextHalt},
		{"first stall probes", stall, sofar{attempts: 1, maxAttempts: 4}, nextProbe},
		{"second stall halts", stall, sofar{attempts: 2, maxAttempts: 4, stallRetried: true}, nextHalt},
		{"memory cap", v(validator.ReasonLengthExceeded, validator.ActionRetryWithCorrection), sofar{attempts: 1, maxAttempts: 4, capped: true}, nextHalt},
		{"block", v(validator.ReasonPromptInjection, validator.ActionBlock), sofar{attempts: 1, maxAttempts: 4}, nextHalt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideNext(tc.v, tc.s); got != tc.want {
				t.Errorf("decideNext = %s, want %s", got, tc.want)
			}
		})
	}
}

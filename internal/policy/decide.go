package policy

import (
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Decide turns the findings of one attempt into a verdict. attempt is the
// 1-based number of the attempt that produced the findings: attempt 1 is
// the original request, attempt 2 the first retry. When the chosen rule's
// action is a retry and attempt > its MaxRetries, the action becomes halt:
// with max_retries 2 the third failed attempt halts.
//
// Findings without a reason are notes. The worst finding is the one whose
// reason has the highest risk; among equals, the first in the slice, but
// one whose rule refuses before one whose rule asks for approval. A
// finding's Hint (fix_syntax for a mechanically repairable JSON error)
// replaces a retry action, never a halt or block. When every finding maps
// to the release action (the guard failing open), the verdict is pass and
// the findings are kept as notes. Repeated findings (the same reason over
// the same span) are listed once. Decide does not modify findings.
func (p *Policy) Decide(findings []validator.Finding, attempt int) validator.Verdict {
	findings = validator.UniqueFindings(findings) // a failure reported by two checks is one finding
	best := -1
	var bestRule Rule
	for i, f := range findings {
		if f.Reason == validator.ReasonNone {
			continue
		}
		r := p.Rule(f.Reason)
		if r.Action == validator.ActionRelease {
			continue
		}
		// Among equal risks a refusal wins over asking a person: an
		// approval must not release what another rule halts.
		if best < 0 || r.Risk > bestRule.Risk ||
			r.Risk == bestRule.Risk && bestRule.Action == validator.ActionApprove && r.Action != validator.ActionApprove {
			best, bestRule = i, r
		}
	}
	v := validator.Verdict{Verdict: validator.Pass, Risk: validator.RiskLow, Action: validator.ActionRelease, Findings: findings}
	if v.Findings == nil {
		v.Findings = []validator.Finding{}
	}
	if best < 0 {
		return v
	}
	f := findings[best]
	v.Verdict = validator.Fail
	v.Risk = bestRule.Risk
	v.Reason = f.Reason
	v.Action = bestRule.Action
	if v.Action.IsRetry() && f.Hint.IsRetry() {
		v.Action = f.Hint
	}
	if v.Action.IsRetry() && attempt > bestRule.MaxRetries {
		v.Action = validator.ActionHalt
	}
	return v
}

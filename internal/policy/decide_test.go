package policy

import (
	"testing"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

func fnd(r validator.Reason, start int) validator.Finding {
	return validator.Finding{Check: "c", Reason: r, Start: start, End: start + 1}
}

func TestDecide(t *testing.T) {
	p := DefaultFor(&validator.Registry{})
	hinted := fnd(validator.ReasonInvalidJSON, 4)
	hinted.Hint = validator.ActionFixSyntax
	tests := []struct {
		name     string
		findings []validator.Finding
		attempt  int
		verdict  validator.Outcome
		reason   validator.Reason
		action   validator.Action
		risk     validator.Risk
	}{
		{"no findings", nil, 1, validator.Pass, "", validator.ActionRelease, validator.RiskLow},
		{"notes only", []validator.Finding{{Check: "x", Message: "note"}}, 1, validator.Pass, "", validator.ActionRelease, validator.RiskLow},
		{"guard unavailable fails open", []validator.Finding{fnd(validator.ReasonGuardUnavailable, 0)}, 1, validator.Pass, "", validator.ActionRelease, validator.RiskLow},
		{"invalid json", []validator.Finding{fnd(validator.ReasonInvalidJSON, 3)}, 1, validator.Fail, validator.ReasonInvalidJSON, validator.ActionRetryStricterFormat, validator.RiskMedium},
		{"fix_syntax hint", []validator.Finding{hinted}, 1, validator.Fail, validator.ReasonInvalidJSON, validator.ActionFixSyntax, validator.RiskMedium},
		{"hint after budget halts", []validator.Finding{hinted}, 3, validator.Fail, validator.ReasonInvalidJSON, validator.ActionHalt, validator.RiskMedium},
		{"loop first retry", []validator.Finding{fnd(validator.ReasonRepetitionLoop, 9)}, 2, validator.Fail, validator.ReasonRepetitionLoop, validator.ActionRetryWithCorrection, validator.RiskMedium},
		{"loop budget spent", []validator.Finding{fnd(validator.ReasonRepetitionLoop, 9)}, 3, validator.Fail, validator.ReasonRepetitionLoop, validator.ActionHalt, validator.RiskMedium},
		{"stall retries once", []validator.Finding{fnd(validator.ReasonStall, 0)}, 1, validator.Fail, validator.ReasonStall, validator.ActionRetryWithCorrection, validator.RiskMedium},
		{"stall then halts", []validator.Finding{fnd(validator.ReasonStall, 0)}, 2, validator.Fail, validator.ReasonStall, validator.ActionHalt, validator.RiskMedium},
		{"secret beats length", []validator.Finding{fnd(validator.ReasonLengthExceeded, 1), fnd(validator.ReasonSecretLeak, 50)}, 1, validator.Fail, validator.ReasonSecretLeak, validator.ActionHalt, validator.RiskHigh},
		{"equal risk keeps order", []validator.Finding{fnd(validator.ReasonBannedContent, 30), fnd(validator.ReasonRepetitionLoop, 10)}, 1, validator.Fail, validator.ReasonBannedContent, validator.ActionRetryWithCorrection, validator.RiskMedium},
		{"drift low", []validator.Finding{fnd(validator.ReasonInstructionDrift, 0)}, 1, validator.Fail, validator.ReasonInstructionDrift, validator.ActionRetryWithCorrection, validator.RiskLow},
		{"injection blocks", []validator.Finding{fnd(validator.ReasonPromptInjection, 0)}, 1, validator.Fail, validator.ReasonPromptInjection, validator.ActionBlock, validator.RiskHigh},
		{"halt not hinted", []validator.Finding{{Reason: validator.ReasonSystemPromptLeak, Hint: validator.ActionFixSyntax}}, 1, validator.Fail, validator.ReasonSystemPromptLeak, validator.ActionHalt, validator.RiskHigh},
		{"upstream error", []validator.Finding{fnd(validator.ReasonUpstreamError, 0)}, 1, validator.Fail, validator.ReasonUpstreamError, validator.ActionHalt, validator.RiskMedium},
		{"tool call", []validator.Finding{fnd(validator.ReasonMalformedToolCall, 0)}, 1, validator.Fail, validator.ReasonMalformedToolCall, validator.ActionRetryStricterFormat, validator.RiskMedium},
		{"unknown reason halts", []validator.Finding{{Reason: "made_up"}}, 1, validator.Fail, "made_up", validator.ActionHalt, validator.RiskHigh},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := p.Decide(tc.findings, tc.attempt)
			if v.Verdict != tc.verdict || v.Reason != tc.reason || v.Action != tc.action || v.Risk != tc.risk {
				t.Errorf("got %s/%s/%s/%s, want %s/%s/%s/%s", v.Verdict, v.Reason, v.Action, v.Risk, tc.verdict, tc.reason, tc.action, tc.risk)
			}
			if len(v.Findings) != len(tc.findings) || v.Findings == nil {
				t.Errorf("findings = %v", v.Findings)
			}
		})
	}
}

func TestDecidePolicyOverride(t *testing.T) {
	p, err := Parse([]byte("max_retries: 0\nactions:\n  length_exceeded: {action: halt, risk: high}\n"), "x", &validator.Registry{})
	if err != nil {
		t.Fatal(err)
	}
	if v := p.Decide([]validator.Finding{fnd(validator.ReasonRepetitionLoop, 0)}, 1); v.Action != validator.ActionHalt {
		t.Errorf("max_retries 0: action %s", v.Action)
	}
	v := p.Decide([]validator.Finding{fnd(validator.ReasonRepetitionLoop, 0), fnd(validator.ReasonLengthExceeded, 5)}, 1)
	if v.Reason != validator.ReasonLengthExceeded || v.Risk != validator.RiskHigh {
		t.Errorf("override: %+v", v)
	}
}

package guard

import (
	"context"
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// InputPolicy is the policy file's guard section: how the embedded
// classifier screens user and tool messages before generation.
//
//	guard:
//	  input: high   # off | medium | high
type InputPolicy struct {
	// Input is the lowest prompt_injection risk that blocks a request:
	// "high" (the default: the classifier's 0.2% false-positive level on
	// held-out training data), "medium" (its 1% level: more recall, more
	// false alarms), or "off".
	Input string `yaml:"input"`
	// FailOpen is read by the policy, not here: the shorthand for its rule
	// for guard_unavailable (true: release, false: halt).
	FailOpen *bool `yaml:"fail_open"`
}

// DefaultInputPolicy blocks only high-risk input. The classifier's
// medium threshold flagged 6-13% of benign text in the evaluation sets,
// too many false alarms to block on by default.
func DefaultInputPolicy() InputPolicy { return InputPolicy{Input: "high"} }

// InputCheck returns the gateway's InputCheck hook for p: nil when input
// screening is off, else a check that blocks at or above p's risk and lets
// lower scores through.
func (g *Guard) InputCheck(p InputPolicy) (func(context.Context, *validator.Request) *validator.Verdict, error) {
	if p.Input == "" {
		p = DefaultInputPolicy()
	}
	if p.Input == "off" {
		return nil, nil
	}
	min, err := validator.ParseRisk(p.Input)
	if err != nil || min == validator.RiskLow {
		return nil, fmt.Errorf("guard: input: want off, medium or high, got %q", p.Input)
	}
	return func(ctx context.Context, req *validator.Request) *validator.Verdict {
		v := g.CheckInput(ctx, req)
		if v == nil || v.Risk < min {
			return nil
		}
		return v
	}, nil
}

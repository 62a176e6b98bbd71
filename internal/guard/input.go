package guard

import (
	"context"
	"fmt"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// InputPolicy is the policy file's guard section: how the embedded
// classifier screens user and tool messages before generation.
//
//	guard:
//	  input: high          # off | medium | high: user (and other) messages
//	  tool_results: medium # off | medium | high: role "tool" / "function" messages
//	  tool_results_action: block # block | redact
type InputPolicy struct {
	// Input is the lowest prompt_injection risk that blocks a request:
	// "high" (the default: the classifier's 0.2% false-positive level on
	// held-out training data), "medium" (its 1% level: more recall, more
	// false alarms), or "off".
	Input string `yaml:"input"`
	// FailOpen is read by the policy, not here: the shorthand for its rule
	// for guard_unavailable (true: release, false: halt).
	FailOpen *bool `yaml:"fail_open"`
	// ToolResults is the lowest risk at which a tool result counts as an
	// indirect injection (default "medium"): tool results are data, and
	// text in them that speaks to the agent is judged more strictly than a
	// user's own words.
	ToolResults string `yaml:"tool_results"`
	// ToolResultsAction is what an injected tool result does: "block"
	// refuses the request (the default), "redact" forwards it with the
	// result's content replaced by a notice.
	ToolResultsAction string `yaml:"tool_results_action"`
}

// DefaultInputPolicy blocks only high-risk user input (the classifier's
// medium threshold flagged 6-13% of benign text in the evaluation sets, too
// many false alarms to block on by default) and tool results from medium
// risk on.
func DefaultInputPolicy() InputPolicy {
	return InputPolicy{Input: "high", ToolResults: "medium", ToolResultsAction: "block"}
}

// RedactedNotice replaces the content of a tool result the redact action
// removed.
const RedactedNotice = "[Aegis removed this tool result: it looked like a prompt injection.]"

func parseLevel(what, s string) (validator.Risk, bool, error) {
	if s == "off" {
		return 0, false, nil
	}
	r, err := validator.ParseRisk(s)
	if err != nil || r == validator.RiskLow {
		return 0, false, fmt.Errorf("guard: %s: want off, medium or high, got %q", what, s)
	}
	return r, true, nil
}

// InputCheck returns the gateway's InputCheck hook for p: nil when input
// screening is off, else a check that blocks at or above p's risk for each
// role and lets lower scores through. With tool_results_action redact, an
// injected tool result does not block: the verdict passes with action
// release and a finding per redacted message, and Redact rewrites the
// request.
func (g *Guard) InputCheck(p InputPolicy) (func(context.Context, *validator.Request) *validator.Verdict, error) {
	d := DefaultInputPolicy()
	if p.Input == "" {
		p.Input = d.Input
	}
	if p.ToolResults == "" {
		p.ToolResults = d.ToolResults
	}
	if p.ToolResultsAction == "" {
		p.ToolResultsAction = d.ToolResultsAction
	}
	userMin, userOn, err := parseLevel("input", p.Input)
	if err != nil {
		return nil, err
	}
	toolMin, toolOn, err := parseLevel("tool_results", p.ToolResults)
	if err != nil {
		return nil, err
	}
	if p.ToolResultsAction != "block" && p.ToolResultsAction != "redact" {
		return nil, fmt.Errorf("guard: tool_results_action: want block or redact, got %q", p.ToolResultsAction)
	}
	if !userOn && !toolOn {
		return nil, nil
	}
	redact := p.ToolResultsAction == "redact"
	return func(ctx context.Context, req *validator.Request) *validator.Verdict {
		var v *validator.Verdict
		if userOn {
			if u := g.CheckInput(ctx, userOnly(req)); u != nil && u.Risk >= userMin {
				v = u
			}
		}
		if !toolOn || v != nil {
			return v
		}
		t := g.CheckToolResults(ctx, req)
		if t == nil || t.Risk < toolMin {
			return nil
		}
		if redact {
			t.Verdict, t.Action, t.Reason = validator.Pass, validator.ActionRelease, validator.ReasonNone
		}
		return t
	}, nil
}

// userOnly is req without its tool results, for the user-input screen.
func userOnly(req *validator.Request) *validator.Request {
	if req == nil {
		return nil
	}
	q := &validator.Request{Messages: make([]validator.Message, len(req.Messages))}
	for i, m := range req.Messages {
		if m.Role == "tool" || m.Role == "function" {
			m.Content = "" // kept in place, so findings keep their message index
		}
		q.Messages[i] = m
	}
	return q
}

// CheckToolResults screens the tool results of req for indirect prompt
// injection. It returns nil when none is flagged, else a fail verdict with
// action block whose findings name each flagged result's message, tool and
// call id, the worst first.
func (g *Guard) CheckToolResults(ctx context.Context, req *validator.Request) *validator.Verdict {
	if req == nil {
		return nil
	}
	var v *validator.Verdict
	for i, m := range req.Messages {
		if ctx.Err() != nil {
			return nil
		}
		if (m.Role != "tool" && m.Role != "function") || strings.TrimSpace(m.Content) == "" {
			continue
		}
		s := g.ScoreToolResultOf(req, m.Content)
		if s.Risk < validator.RiskMedium {
			continue
		}
		name := req.ToolName(i)
		what := "tool result"
		if name != "" {
			what = fmt.Sprintf("result of tool %q", name)
		}
		if m.ToolCallID != "" {
			what += fmt.Sprintf(" (call %s)", m.ToolCallID)
		}
		f := validator.Finding{
			Check: "guard", Reason: validator.ReasonPromptInjection, Start: 0, End: len(m.Content),
			Message: fmt.Sprintf("message %d, the %s, looks like an indirect prompt injection: %s", i, what, s.Why),
			Path:    fmt.Sprintf("messages/%d", i),
		}
		if v == nil {
			v = &validator.Verdict{Verdict: validator.Fail, Risk: s.Risk, Reason: validator.ReasonPromptInjection, Action: validator.ActionBlock}
		}
		if s.Risk > v.Risk {
			v.Risk = s.Risk
			v.Findings = append([]validator.Finding{f}, v.Findings...)
		} else {
			v.Findings = append(v.Findings, f)
		}
	}
	return v
}

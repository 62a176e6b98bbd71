package policy

import (
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Move is what follows an attempt's verdict.
type Move int

const (
	Release   Move = iota // the attempt passed: its output goes out with the verdict
	Retry                 // a hidden retry on the same upstream
	FixSyntax             // repair the JSON locally, without a round trip (else Retry)
	Probe                 // a stall: retry once, on this upstream if it is healthy, else on a fallback
	Halt                  // answer with the verdict's error
	Approve               // hold the tool calls until a person decides
)

func (m Move) String() string {
	switch m {
	case Release:
		return "release"
	case Retry:
		return "retry"
	case FixSyntax:
		return "fix_syntax"
	case Probe:
		return "probe"
	case Halt:
		return "halt"
	case Approve:
		return "approve"
	}
	return fmt.Sprintf("move(%d)", int(m))
}

// SoFar is what the move after an attempt depends on besides its verdict.
type SoFar struct {
	Attempts, MaxAttempts int
	// Sent: the client already has some of the output.
	Sent bool
	// Optimistic: the attempt released optimistically (text went out
	// before the checks cleared it).
	Optimistic bool
	// ToolCalls: the attempt's answer holds tool calls.
	ToolCalls bool
	// FixTried: the local JSON repair was tried on this attempt.
	FixTried     bool
	StallRetried bool
	// Capped: the response passed the gateway's memory cap; a retry
	// would only produce as much again.
	Capped bool
	// CutShort: the output failed only because the upstream stopped at
	// the client's own max_tokens (finish_reason "length"); a retry has
	// the same budget and stops the same way.
	CutShort bool
}

// Next decides what follows an attempt whose verdict (made by Decide) is
// v: the one place where release, retry, local repair, the stall probe
// and halt are chosen. It is pure.
//
//   - A pass is released.
//   - A JSON error with the fix_syntax hint, under a rule that retries,
//     is first repaired locally when nothing was sent and no tool call is
//     involved (a cut-off answer is the repair's own refusal).
//   - A verdict whose action is not a retry halts; so does one past the
//     attempts cap, past the memory cap, one on output the client's own
//     max_tokens cut short, or after the client saw text a check rejected
//     (optimistic release): no repair can hide it.
//   - A first stall probes the upstream; a second halts.
//   - An approve verdict holds the attempt's tool calls for a person; one
//     with no tool call (or after an optimistic release) halts: there is
//     nothing held to decide on.
func (p *Policy) Next(v validator.Verdict, s SoFar) Move {
	switch {
	case v.Verdict == validator.Pass:
		return Release
	case v.Action == validator.ActionApprove:
		if s.ToolCalls && !s.Optimistic && !s.Capped {
			return Approve
		}
		return Halt
	case !s.FixTried && !s.Sent && !s.ToolCalls && fixable(v) && p.Rule(v.Reason).Action.IsRetry():
		return FixSyntax
	case !v.Action.IsRetry(), s.Attempts >= s.MaxAttempts, s.Capped, s.CutShort:
		return Halt
	case s.Optimistic && s.Sent:
		return Halt
	case v.Reason == validator.ReasonStall && s.StallRetried:
		return Halt
	case v.Reason == validator.ReasonStall:
		return Probe
	}
	return Retry
}

// fixable reports whether v fails on a JSON error that carries the
// fix_syntax hint.
func fixable(v validator.Verdict) bool {
	_, ok := SyntaxFinding(v)
	return ok
}

// SyntaxFinding returns the failing finding of v when it is a JSON error
// with the fix_syntax hint.
func SyntaxFinding(v validator.Verdict) (validator.Finding, bool) {
	if v.Verdict != validator.Fail || v.Reason != validator.ReasonInvalidJSON && v.Reason != validator.ReasonSchemaViolation {
		return validator.Finding{}, false
	}
	for _, f := range v.Findings {
		if f.Reason == v.Reason {
			return f, f.Hint == validator.ActionFixSyntax
		}
	}
	return validator.Finding{}, false
}

// Halted is v as a halt reports it: its action is halt (a block stays a
// block), whatever retry the rule had in mind.
func Halted(v validator.Verdict) validator.Verdict {
	if v.Action != validator.ActionBlock {
		v.Action = validator.ActionHalt
	}
	return v
}

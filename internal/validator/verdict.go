// Package validator defines the contract every output check follows: the
// incremental Validator interface, the Finding it reports, the Verdict that
// Aegis answers with, the stable reason codes and actions, and the Registry
// that makes checks self-describing.
//
// The individual checks live in sub-packages (validator/jsonsyntax,
// validator/repetition, ...). Each has a Register function that adds its
// Spec to a Registry; package checks registers them all, explicitly, for
// policies, `aegis validators` and `aegis check`.
package validator

import (
	"encoding/json"
	"fmt"
)

// Reason is a stable, machine-readable reason code. The set is fixed and
// documented in the README with its error code; add to it only with care,
// never rename.
type Reason string

// The reason codes. An empty Reason means "no failure" and is encoded as JSON null.
const (
	ReasonNone             Reason = ""
	ReasonInvalidJSON      Reason = "invalid_json"
	ReasonSchemaViolation  Reason = "schema_violation"
	ReasonRegexMismatch    Reason = "regex_mismatch"
	ReasonRepetitionLoop   Reason = "repetition_loop"
	ReasonStall            Reason = "stall"
	ReasonLengthExceeded   Reason = "length_exceeded"
	ReasonBannedContent    Reason = "banned_content"
	ReasonSystemPromptLeak Reason = "system_prompt_leak"
	ReasonSecretLeak       Reason = "secret_leak"
	ReasonInstructionDrift Reason = "instruction_drift"
	ReasonPromptInjection  Reason = "prompt_injection"
	// ReasonDataExfiltration: a tool call sends private data (the system
	// prompt, a tool's result) to a destination nobody trustworthy named,
	// with no injection involved (prompt_injection when one chose it).
	ReasonDataExfiltration  Reason = "data_exfiltration"
	ReasonUnsafeContent     Reason = "unsafe_content"
	ReasonMalformedToolCall Reason = "malformed_tool_call"
	ReasonUpstreamError     Reason = "upstream_error"
	ReasonGuardUnavailable  Reason = "guard_unavailable"
)

// Reasons lists every reason code in catalogue order.
var Reasons = []Reason{
	ReasonInvalidJSON, ReasonSchemaViolation, ReasonRegexMismatch, ReasonRepetitionLoop,
	ReasonStall, ReasonLengthExceeded, ReasonBannedContent, ReasonSystemPromptLeak,
	ReasonSecretLeak, ReasonInstructionDrift, ReasonPromptInjection, ReasonDataExfiltration,
	ReasonUnsafeContent, ReasonMalformedToolCall, ReasonUpstreamError, ReasonGuardUnavailable,
}

func (r Reason) String() string { return string(r) }

// Valid reports whether r is one of the catalogued codes (or empty).
func (r Reason) Valid() bool {
	if r == ReasonNone {
		return true
	}
	for _, c := range Reasons {
		if c == r {
			return true
		}
	}
	return false
}

// MarshalJSON encodes ReasonNone as null.
func (r Reason) MarshalJSON() ([]byte, error) {
	if r == ReasonNone {
		return []byte("null"), nil
	}
	return json.Marshal(string(r))
}

// UnmarshalJSON accepts null or a catalogued code.
func (r *Reason) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = ReasonNone
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("reason: %w", err)
	}
	if !Reason(s).Valid() {
		return fmt.Errorf("reason: unknown code %q", s)
	}
	*r = Reason(s)
	return nil
}

// Action is what Aegis does about a verdict.
type Action string

// The actions, as fixed by the design.
const (
	ActionRelease             Action = "release"
	ActionRetryStricterFormat Action = "retry_with_stricter_format"
	ActionFixSyntax           Action = "fix_syntax"
	ActionRetryWithCorrection Action = "retry_with_correction"
	ActionHalt                Action = "halt"
	ActionBlock               Action = "block"
	// ActionApprove holds a tool call until a person decides; a timeout
	// denies. Without an approver configured the policy halts instead.
	ActionApprove Action = "approve"
)

// ActionRedact is recorded, never chosen by a policy: the MCP proxy
// forwarded a tool result with its secrets replaced. It is not in Actions
// (the actions a policy's rules may name).
const ActionRedact Action = "redact"

// Actions lists every action a policy's rules may name.
var Actions = []Action{
	ActionRelease, ActionRetryStricterFormat, ActionFixSyntax,
	ActionRetryWithCorrection, ActionHalt, ActionBlock, ActionApprove,
}

func (a Action) String() string { return string(a) }

// Valid reports whether a is a known action.
func (a Action) Valid() bool {
	for _, c := range Actions {
		if c == a {
			return true
		}
	}
	return false
}

// IsRetry reports whether the action asks for a hidden retry.
func (a Action) IsRetry() bool {
	return a == ActionRetryStricterFormat || a == ActionRetryWithCorrection || a == ActionFixSyntax
}

// Risk grades how bad a failure is.
type Risk int

// Risk levels, ordered so that a larger value is worse.
const (
	RiskLow Risk = iota
	RiskMedium
	RiskHigh
)

func (r Risk) String() string {
	switch r {
	case RiskLow:
		return "low"
	case RiskMedium:
		return "medium"
	case RiskHigh:
		return "high"
	}
	return fmt.Sprintf("Risk(%d)", int(r))
}

// ParseRisk parses "low", "medium" or "high".
func ParseRisk(s string) (Risk, error) {
	switch s {
	case "low":
		return RiskLow, nil
	case "medium":
		return RiskMedium, nil
	case "high":
		return RiskHigh, nil
	}
	return 0, fmt.Errorf("unknown risk %q (want low, medium or high)", s)
}

// MarshalText encodes the risk as its name.
func (r Risk) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText decodes a risk name.
func (r *Risk) UnmarshalText(b []byte) error {
	v, err := ParseRisk(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Finding is what one check saw: a failure (or, with Reason empty, a note)
// located by byte offsets into the output text of the attempt.
type Finding struct {
	// Check is the registry name of the validator that produced it.
	Check string `json:"check"`
	// Reason is the reason code this finding argues for.
	Reason Reason `json:"reason"`
	// Start and End are byte offsets [Start, End) into the output text.
	// For a failure "at a point" (a stray byte in JSON) End == Start+1.
	Start int `json:"start"`
	End   int `json:"end"`
	// Message says what is wrong, for humans.
	Message string `json:"message"`
	// Hint, when set, overrides the policy's action for this finding
	// (for example fix_syntax when a JSON error is mechanically repairable).
	Hint Action `json:"hint,omitempty"`
	// Path locates the finding inside structured output (a JSON pointer
	// such as "/items/3/name" or "tool_calls/0/arguments"), when relevant.
	Path string `json:"path,omitempty"`
	// Categories are a guard model's own categories behind the finding,
	// comma-separated (Llama Guard's S1..S14, Qwen3Guard's names, a Granite
	// Guardian risk).
	Categories string `json:"categories,omitempty"`
}

// Verdict is the short, machine-readable answer Aegis gives for one output.
type Verdict struct {
	// ID carries the case or request id, when there is one.
	ID       string    `json:"id,omitempty"`
	Verdict  Outcome   `json:"verdict"`
	Risk     Risk      `json:"risk"`
	Reason   Reason    `json:"reason"`
	Action   Action    `json:"action"`
	Findings []Finding `json:"findings"`
	// Error is set only when the input could not be judged at all
	// (a malformed case line); Verdict is then "fail".
	Error string `json:"error,omitempty"`
}

// Outcome is pass or fail.
type Outcome string

// The two outcomes.
const (
	Pass Outcome = "pass"
	Fail Outcome = "fail"
)

func (o Outcome) String() string { return string(o) }

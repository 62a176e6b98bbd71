package mcp

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-sentinel/aegis/internal/policy"
)

// Action is what the proxy does about a tool it flagged in a listing.
type Action int

// The actions on a flagged tool.
const (
	// ActionWarn lists the tool and records the finding.
	ActionWarn Action = iota
	// ActionHide drops the tool from the listing, and refuses calls to it.
	ActionHide
	// ActionRefuse answers the whole listing with an error.
	ActionRefuse
)

var actionNames = [...]string{"warn", "hide", "refuse"}

func (a Action) String() string {
	if a >= 0 && int(a) < len(actionNames) {
		return actionNames[a]
	}
	return fmt.Sprintf("Action(%d)", int(a))
}

// UnmarshalText decodes an action name.
func (a *Action) UnmarshalText(b []byte) error {
	for i, n := range actionNames {
		if string(b) == n {
			*a = Action(i)
			return nil
		}
	}
	return fmt.Errorf("unknown action %q (want %s)", b, strings.Join(actionNames[:], ", "))
}

// MarshalText encodes the action name.
func (a Action) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// SecretAction is what the proxy does about a secret in a tool result.
type SecretAction int

// The actions on a secret in a result.
const (
	SecretRedact SecretAction = iota // replace the secret with [REDACTED secret_leak]
	SecretRefuse                     // replace the whole result with an error result
)

func (a SecretAction) String() string {
	if a == SecretRefuse {
		return "refuse"
	}
	return "redact"
}

// UnmarshalText decodes redact or refuse.
func (a *SecretAction) UnmarshalText(b []byte) error {
	switch string(b) {
	case "redact":
		*a = SecretRedact
	case "refuse":
		*a = SecretRefuse
	default:
		return fmt.Errorf("unknown secrets action %q (want redact or refuse)", b)
	}
	return nil
}

// Config is the policy file's mcp section:
//
//	mcp:
//	  poisoned: hide          # warn | hide | refuse: a description that instructs the model
//	  changed: hide           # warn | hide | refuse: a tool that changed since it was pinned
//	  guard_tools: 0.95       # the guard's injection probability that flags a description (0: off)
//	  guard_results: 0.95     # 0 turns the document screen of results off
//	  secrets: redact         # redact | refuse: a secret in a tool result
//	  max_result_bytes: 1048576
//	  max_message_bytes: 4194304
//	  call_timeout: 10m
//
// The text checks of the same policy (leak, banned, regex and the guard
// checks) run over tool-call arguments; leak runs over results too.
type Config struct {
	Poisoned        Action        `yaml:"poisoned"`
	Changed         Action        `yaml:"changed"`
	GuardTools      float64       `yaml:"guard_tools"`
	GuardResults    float64       `yaml:"guard_results"`
	Secrets         SecretAction  `yaml:"secrets"`
	MaxResultBytes  int           `yaml:"max_result_bytes"`
	MaxMessageBytes int           `yaml:"max_message_bytes"`
	CallTimeout     time.Duration `yaml:"call_timeout"`
}

// Defaults for Config.
const (
	DefaultMaxResultBytes  = 1 << 20
	DefaultMaxMessageBytes = 4 << 20
	DefaultCallTimeout     = 10 * time.Minute
)

// DefaultToolThreshold is the guard's injection probability that flags
// a tool description or result. The embedded classifier learnt from
// prompts; tool text (JSON, terse descriptions) scores higher than prose:
// the reference servers' own descriptions and results reach 0.81 to 0.88,
// the published injections 0.98 and above.
const DefaultToolThreshold = 0.95

// DefaultConfig hides poisoned and changed tools, screens descriptions
// and results with the guard at DefaultToolThreshold, and redacts
// secrets.
func DefaultConfig() Config {
	return Config{Poisoned: ActionHide, Changed: ActionHide, GuardTools: DefaultToolThreshold, GuardResults: DefaultToolThreshold,
		Secrets: SecretRedact, MaxResultBytes: DefaultMaxResultBytes, MaxMessageBytes: DefaultMaxMessageBytes,
		CallTimeout: DefaultCallTimeout}
}

// ConfigFrom decodes the policy's mcp section over DefaultConfig.
func ConfigFrom(p *policy.Policy) (Config, error) {
	c := DefaultConfig()
	if p == nil || p.MCP.Kind == 0 || (p.MCP.Kind == yaml.ScalarNode && p.MCP.Tag == "!!null") {
		return c, nil
	}
	if err := policy.DecodeStrict(&p.MCP, &c); err != nil {
		return c, fmt.Errorf("policy %s: mcp: %w", p.Source, err)
	}
	for _, g := range []struct {
		name string
		v    float64
	}{{"guard_tools", c.GuardTools}, {"guard_results", c.GuardResults}} {
		if g.v < 0 || g.v >= 1 {
			return c, fmt.Errorf("policy %s: mcp: %s %v: want a probability from 0 (off) to below 1", p.Source, g.name, g.v)
		}
	}
	if c.MaxResultBytes <= 0 || c.MaxMessageBytes <= 0 || c.CallTimeout < 0 {
		return c, fmt.Errorf("policy %s: mcp: max_result_bytes and max_message_bytes must be positive, call_timeout not negative", p.Source)
	}
	return c, nil
}

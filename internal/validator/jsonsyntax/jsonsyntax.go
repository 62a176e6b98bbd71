// Package jsonsyntax is the json_syntax check: an incremental, byte-level
// JSON syntax checker that fails at the first byte of the output that can
// no longer become valid JSON, with the exact offset and a repair hint.
//
// The Scanner is exported so other checks (json_schema, tool_call) can
// follow the structure of a document as it streams; Repair fixes the
// mechanically repairable mistakes.
package jsonsyntax

import (
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Name is the registry name of the check.
const Name = "json_syntax"

// Config configures json_syntax.
type Config struct {
	// Always applies the check even when the request did not ask for
	// JSON through response_format (the prompt-constraint compiler sets it
	// for "reply in JSON only").
	Always bool `yaml:"always" json:"always"`
	// MaxDepth bounds container nesting (default 128).
	MaxDepth int `yaml:"max_depth" json:"max_depth"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config { return &Config{MaxDepth: DefaultMaxDepth} }

const doc = `Checks that the output is exactly one JSON value, byte by byte as it
streams, and fails at the first byte that can no longer become valid JSON:
a trailing comma, single quotes, NaN or Infinity, an invalid escape, a raw
control character or invalid UTF-8 in a string, a malformed number or
literal, nesting deeper than max_depth, text before the value or a second
value after it. At the end of the output an unterminated string or
unclosed container fails at the output's length (a zero-width finding).

Leading and trailing whitespace is allowed. A markdown code fence
(` + "```json" + `) is not: the client asked for JSON and would get a fence,
so it fails at byte 0, with the hint fix_syntax since Repair strips it.

Applies when the request's response_format is json_object or json_schema,
or always with "always: true". Releases nothing until the document is
complete and valid (JSON is released whole). Findings whose error Repair
can usually fix (trailing comma, single quotes, fence, output cut off at
the end) carry the hint fix_syntax.`

// Register adds the check to r.
func Register(r *validator.Registry) {
	r.Register(validator.Spec{
		AnswerOnly: true,
		Name:       Name,
		Summary:    "output must be one valid JSON value; fails at the first bad byte",
		Doc:        doc,
		Reasons:    []validator.Reason{validator.ReasonInvalidJSON},
		Example:    "always: true\nmax_depth: 64\n",
		Config:     func() any { return DefaultConfig() },
		New: func(cfg any, req *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil {
				c = DefaultConfig()
			}
			if c.MaxDepth < 0 || c.MaxDepth > 100000 {
				return nil, fmt.Errorf("json_syntax: max_depth %d out of range 0..100000", c.MaxDepth)
			}
			if !c.Always && (req == nil || !req.WantsJSON()) {
				return nil, nil
			}
			return New(c.MaxDepth), nil
		},
	})
}

// Validator is the json_syntax check for one attempt.
type Validator struct {
	sc       Scanner
	findings []validator.Finding
	closed   bool
	settled  int
}

// New returns a json_syntax validator with the given nesting limit
// (<= 0 means DefaultMaxDepth).
func New(maxDepth int) *Validator {
	v := &Validator{}
	v.sc = *NewScanner(maxDepth, nil)
	return v
}

// Name implements validator.Validator.
func (v *Validator) Name() string { return Name }

// Write implements validator.Validator.
func (v *Validator) Write(p []byte) (int, error) {
	if v.findings != nil {
		v.sc.off += len(p)
		return len(p), nil
	}
	v.sc.Write(p)
	if v.sc.err != nil {
		v.report(v.sc.err)
	}
	return len(p), nil
}

func (v *Validator) report(e *SyntaxError) {
	end := e.Offset + 1
	if e.Kind == ErrUnterminated || e.Kind == ErrEmpty {
		end = e.Offset
	}
	f := validator.Finding{
		Check:   Name,
		Reason:  validator.ReasonInvalidJSON,
		Start:   e.Offset,
		End:     end,
		Message: e.Error(),
	}
	if e.Kind.Repairable() {
		f.Hint = validator.ActionFixSyntax
	}
	v.findings = append(v.findings, f)
}

// Settled implements validator.Validator: nothing is settled until the
// document is complete and valid.
// Once the document is complete the release point follows the trailing
// whitespace; a second document later fails after that point.
func (v *Validator) Settled() int {
	if v.findings == nil && v.sc.st == stDone {
		v.settled = v.sc.off
	}
	return v.settled
}

// Findings implements validator.Validator.
func (v *Validator) Findings() []validator.Finding { return v.findings }

// Close implements validator.Validator.
func (v *Validator) Close() {
	if v.closed {
		return
	}
	v.closed = true
	if v.findings != nil {
		return
	}
	if e := v.sc.Close(); e != nil {
		v.report(e)
	}
}

// Err returns the syntax error behind the finding, if any.
func (v *Validator) Err() *SyntaxError { return v.sc.err }

// Package instruct holds the checks for explicit, rule-checkable
// instructions in a prompt that the general checks do not cover: response
// language, code only, letter case, quoting, required keywords, titles,
// bullet and section counts, postscripts, commas, closing phrases and the
// other IFEval-style format rules. The constraint compiler
// (internal/constraints) turns an instruction into one of these checks; a
// policy may also enable them directly.
//
// Positional rules (no commas, letter case, an opening quote, code only)
// fail at the offending byte as it streams. Rules that can only be judged
// on the whole output (a keyword never used, a missing title, a bullet
// count) report at the end of the output, Start == End == its length, so
// they hold nothing back. The language check holds back the first
// LanguageWindow bytes, until it has enough text to identify the language.
// Every failure is instruction_drift.
package instruct

import (
	"github.com/aegis-sentinel/aegis/internal/validator"
)

var drift = []validator.Reason{validator.ReasonInstructionDrift}

// endCheck buffers the output and judges it whole at Close. Its findings
// sit at the end of the output, so it settles everything it has seen.
type endCheck struct {
	name     string
	text     []byte
	judge    func(text []byte) string // "" when the output complies
	findings []validator.Finding
	closed   bool
}

func (c *endCheck) Name() string { return c.name }
func (c *endCheck) Write(p []byte) (int, error) {
	c.text = append(c.text, p...)
	return len(p), nil
}
func (c *endCheck) Settled() int                  { return len(c.text) }
func (c *endCheck) Findings() []validator.Finding { return c.findings }
func (c *endCheck) Close() {
	if c.closed {
		return
	}
	c.closed = true
	if msg := c.judge(c.text); msg != "" {
		n := len(c.text)
		c.findings = append(c.findings, validator.Finding{Check: c.name, Reason: validator.ReasonInstructionDrift, Start: n, End: n, Message: msg})
	}
}

func newEnd(name string, judge func([]byte) string) *endCheck {
	return &endCheck{name: name, judge: judge}
}

// fail builds a finding of check name at [start, end).
func fail(name string, start, end int, msg string) validator.Finding {
	return validator.Finding{Check: name, Reason: validator.ReasonInstructionDrift, Start: start, End: end, Message: msg}
}

// Package toolcall is the tool_call check: every function call the model
// makes must name a function the request declared, carry arguments that
// are one JSON value, and satisfy that function's parameters schema.
package toolcall

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/jsonschema"
	"github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax"
)

// Name is the registry name of the check.
const Name = "tool_call"

// Config configures tool_call.
type Config struct {
	// CheckSchema validates arguments against tools[].function.parameters
	// (default true).
	CheckSchema bool `yaml:"check_schema" json:"check_schema"`
	// AssertFormat makes "format" in parameter schemas an assertion.
	AssertFormat bool `yaml:"assert_format" json:"assert_format"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config { return &Config{CheckSchema: true} }

const doc = `Checks each completed tool call: the function name must be one the
request declared in tools (else the call fails at its name), the
arguments must be exactly one JSON value (checked by the json_syntax
scanner; the finding has the offset inside the arguments and the hint
fix_syntax when Repair could fix it), and, with check_schema, the parsed
arguments must satisfy tools[].function.parameters (compiled once and
cached with json_schema's cache). Empty arguments count as {} (some
servers send "" for a function without parameters).

Findings are returned from CheckToolCall, with Path "tool_calls/N/name"
or "tool_calls/N/arguments[/json/pointer]" and Start/End as byte offsets
into that call's arguments string. The assistant text itself is not
judged: the check settles all of it at once.`

// Register adds the check to r.
func Register(r *validator.Registry) {
	r.Register(validator.Spec{
		Name:    Name,
		Summary: "tool calls must name a declared function with JSON arguments that fit its schema",
		Doc:     doc,
		Reasons: []validator.Reason{validator.ReasonMalformedToolCall},
		Example: "check_schema: true\nassert_format: false\n",
		Config:  func() any { return DefaultConfig() },
		New: func(cfg any, req *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil {
				c = DefaultConfig()
			}
			var tools []validator.Tool
			if req != nil {
				tools = req.Tools
			}
			return New(tools, c)
		},
	})
}

// Validator is the tool_call check for one attempt.
type Validator struct {
	tools map[string]*jsonschema.Compiled // nil value: no schema to check
	n     int
}

// New builds the check for the request's tools. A parameters schema that
// does not compile is an error naming the tool.
func New(tools []validator.Tool, cfg *Config) (*Validator, error) {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	v := &Validator{tools: make(map[string]*jsonschema.Compiled, len(tools))}
	for _, t := range tools {
		var comp *jsonschema.Compiled
		params := bytes.TrimSpace(t.Parameters)
		if cfg.CheckSchema && len(params) > 0 && string(params) != "null" {
			var err error
			comp, err = jsonschema.DefaultCache.Compile(params, jsonschema.Options{AssertFormat: cfg.AssertFormat})
			if err != nil {
				return nil, fmt.Errorf("tool_call: parameters of tool %q: %w", t.Name, err)
			}
		}
		v.tools[t.Name] = comp
	}
	return v, nil
}

// Name implements validator.Validator.
func (v *Validator) Name() string { return Name }

// Write implements validator.Validator; the text is not judged.
func (v *Validator) Write(p []byte) (int, error) {
	v.n += len(p)
	return len(p), nil
}

// Settled implements validator.Validator: all text is settled.
func (v *Validator) Settled() int { return v.n }

// Findings implements validator.Validator: the text never fails this
// check; tool call findings are returned by CheckToolCall.
func (v *Validator) Findings() []validator.Finding { return nil }

// Close implements validator.Validator.
func (v *Validator) Close() {}

// CheckToolCall implements validator.ToolCallChecker.
func (v *Validator) CheckToolCall(call validator.ToolCall) []validator.Finding {
	base := "tool_calls/" + strconv.Itoa(call.Index)
	comp, ok := v.tools[call.Name]
	if !ok {
		msg := fmt.Sprintf("call to unknown function %q", call.Name)
		if len(v.tools) == 0 {
			msg += " (the request declared no tools)"
		}
		return []validator.Finding{{
			Check: Name, Reason: validator.ReasonMalformedToolCall, Start: 0, End: 0,
			Message: msg, Path: base + "/name",
		}}
	}
	args := []byte(call.Arguments)
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	// The json_schema check judges the arguments as it would a streamed
	// response: a decisive parameters schema (the usual strict tool
	// schema) is decided in one pass, without a second parse. Its
	// scanner reads the whole document, so arguments it passes are JSON;
	// only when it finds something are they scanned again, so that a
	// syntax error is what is reported first.
	var sv *jsonschema.Validator
	if comp != nil {
		sv = jsonschema.New(comp, nil)
		sv.Write(args)
		sv.Close()
		if len(sv.Findings()) == 0 {
			return nil
		}
	}
	if e := jsonsyntax.Check(args); e != nil {
		end := e.Offset + 1
		if end > len(call.Arguments) {
			end = e.Offset
		}
		f := validator.Finding{
			Check: Name, Reason: validator.ReasonMalformedToolCall, Start: e.Offset, End: end,
			Message: fmt.Sprintf("arguments of %q are not JSON: %v", call.Name, e), Path: base + "/arguments",
		}
		if e.Kind.Repairable() {
			f.Hint = validator.ActionFixSyntax
		}
		return []validator.Finding{f}
	}
	if sv == nil {
		return nil
	}
	var out []validator.Finding
	for _, f := range sv.Findings() {
		out = append(out, validator.Finding{
			Check: Name, Reason: validator.ReasonMalformedToolCall, Start: f.Start, End: f.End,
			Message: fmt.Sprintf("arguments of %q break its parameters schema: %s", call.Name, f.Message),
			Path:    base + "/arguments" + f.Path,
		})
	}
	return out
}

var _ validator.ToolCallChecker = (*Validator)(nil)

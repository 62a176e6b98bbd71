// Package checks lists every built-in check: Register adds them all to a
// registry, explicitly, so what a binary can check is decided where it
// starts (cmd's commands register into validator.Default once) and not by
// which packages happen to be imported.
package checks

import (
	"sync"

	"github.com/aegis-sentinel/aegis/internal/guard"
	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/banned"
	"github.com/aegis-sentinel/aegis/internal/validator/instruct"
	"github.com/aegis-sentinel/aegis/internal/validator/jsonschema"
	"github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax"
	"github.com/aegis-sentinel/aegis/internal/validator/leak"
	"github.com/aegis-sentinel/aegis/internal/validator/length"
	"github.com/aegis-sentinel/aegis/internal/validator/regex"
	"github.com/aegis-sentinel/aegis/internal/validator/repetition"
	"github.com/aegis-sentinel/aegis/internal/validator/stall"
	"github.com/aegis-sentinel/aegis/internal/validator/toolcall"
	"github.com/aegis-sentinel/aegis/internal/validator/toolpolicy"
)

// Register adds every built-in check to r.
func Register(r *validator.Registry) {
	for _, reg := range []func(*validator.Registry){
		guard.Register,      // guard: the embedded classifier on the output
		llm.Register,        // guard_llm: a guard model over a local API
		banned.Register,     // banned
		instruct.Register,   // instructions compiled from the prompt
		jsonschema.Register, // json_schema
		jsonsyntax.Register, // json_syntax
		leak.Register,       // leak
		length.Register,     // length
		regex.Register,      // regex
		repetition.Register, // repetition
		stall.Register,      // stall
		toolcall.Register,   // tool_call
	} {
		reg(r)
	}
	toolpolicy.Register(r, toolResultScreen) // tool_policy, its egress rule screening tool results with the guard
}

// toolResultScreen flags injected tool results with the embedded guard
// (loaded on first use); without a guard no result is flagged.
func toolResultScreen(req *validator.Request, text, user string) (bool, string) {
	g := embeddedGuard()
	if g == nil {
		return false, ""
	}
	return g.SuspectToolResult(req, text, user)
}

var embeddedGuard = sync.OnceValue(func() *guard.Guard {
	g, err := guard.Default()
	if err != nil {
		return nil
	}
	return g
})

var defaultOnce sync.Once

// RegisterDefault registers the built-in checks in validator.Default, once
// however often it is called: the commands call it before they read a
// policy.
func RegisterDefault() { defaultOnce.Do(func() { Register(validator.Default) }) }

// Registry returns a new registry holding every built-in check.
func Registry() *validator.Registry {
	r := &validator.Registry{}
	Register(r)
	return r
}

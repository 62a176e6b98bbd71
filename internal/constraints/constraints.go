// Package constraints compiles checkable instructions in a request's system
// and user messages ("in under 50 words", "do not use pandas", "answer in
// French", "respond in JSON only") into check configurations, so drift from
// an explicit instruction is caught by the deterministic checks instead of
// the guard model.
package constraints

import (
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Check is one check compiled from the prompt.
type Check struct {
	// Name is the registry name of the target check ("length", "banned",
	// "instruct_language", ...).
	Name string
	// Config holds the target check's configuration, keyed by its policy
	// field names (max_words, terms, ...).
	Config map[string]any
	// Source is the instruction text the check was compiled from.
	Source string
}

// MemoKey is the validator.Request memo key under which Compiled stores
// the compiled checks.
const MemoKey = "aegis.constraints"

// Compiled returns the checks compiled from req, computing them once per
// request through req.Memo.
func Compiled(req *validator.Request) []Check {
	return req.Memo(MemoKey, func() any { return Compile(req) }).([]Check)
}

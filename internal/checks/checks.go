// Package checks links every built-in check into a binary: importing it
// runs the check packages' init functions, which register their Specs
// with validator.Default. Commands that judge output (serve, check)
// import it once.
package checks

import (
	_ "github.com/aegis-sentinel/aegis/internal/guard"                // guard (embedded classifier on the output)
	_ "github.com/aegis-sentinel/aegis/internal/guard/llm"            // guard_llm (a guard model over a local API)
	_ "github.com/aegis-sentinel/aegis/internal/validator/banned"     // banned
	_ "github.com/aegis-sentinel/aegis/internal/validator/instruct"   // instructions compiled from the prompt
	_ "github.com/aegis-sentinel/aegis/internal/validator/jsonschema" // json_schema
	_ "github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax" // json_syntax
	_ "github.com/aegis-sentinel/aegis/internal/validator/leak"       // leak
	_ "github.com/aegis-sentinel/aegis/internal/validator/length"     // length
	_ "github.com/aegis-sentinel/aegis/internal/validator/regex"      // regex
	_ "github.com/aegis-sentinel/aegis/internal/validator/repetition" // repetition
	_ "github.com/aegis-sentinel/aegis/internal/validator/stall"      // stall
	_ "github.com/aegis-sentinel/aegis/internal/validator/toolcall"   // tool_call
)

// Package checks links every built-in check into a binary: importing it
// runs the check packages' init functions, which register their Specs
// with validator.Default. Commands that judge output (serve, check)
// import it once.
package checks

import (
	_ "github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax" // json_syntax
	_ "github.com/aegis-sentinel/aegis/internal/validator/stall"      // stall
)

package pipeline

// The checks the corpus, the real-data tests and the benchmarks run: each
// package registers itself in validator.Default.
import (
	_ "github.com/aegis-sentinel/aegis/internal/validator/banned"
	_ "github.com/aegis-sentinel/aegis/internal/validator/instruct"
	_ "github.com/aegis-sentinel/aegis/internal/validator/jsonschema"
	_ "github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax"
	_ "github.com/aegis-sentinel/aegis/internal/validator/leak"
	_ "github.com/aegis-sentinel/aegis/internal/validator/length"
	_ "github.com/aegis-sentinel/aegis/internal/validator/regex"
	_ "github.com/aegis-sentinel/aegis/internal/validator/repetition"
	_ "github.com/aegis-sentinel/aegis/internal/validator/stall"
	_ "github.com/aegis-sentinel/aegis/internal/validator/toolcall"
)

// Package jsonschema is the json_schema check: it validates the output
// against the request's response_format JSON Schema (drafts 2020-12 and
// 7, via github.com/santhosh-tekuri/jsonschema/v6), and fails early on a
// streamed prefix that can no longer satisfy the schema.
//
// Compiled schemas are cached process-wide (bounded LRU keyed by the
// schema's hash), so the per-request cost of a repeated schema is a hash
// and a map lookup. The tool_call check shares the cache.
package jsonschema

import (
	"bytes"
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax"
)

// Name is the registry name of the check.
const Name = "json_schema"

// Config configures json_schema.
type Config struct {
	// AssertFormat makes "format" (date-time, email, uuid, ...) an
	// assertion rather than an annotation.
	AssertFormat bool `yaml:"assert_format" json:"assert_format"`
	// Early fails on a streamed prefix that can no longer match (default
	// true); false waits for the whole document.
	Early bool `yaml:"early" json:"early"`
	// MaxBytes bounds the document kept for validation (default 4 MiB);
	// a longer output fails.
	MaxBytes int `yaml:"max_bytes" json:"max_bytes"`
	// MaxDepth bounds nesting (default 128).
	MaxDepth int `yaml:"max_depth" json:"max_depth"`
}

// DefaultConfig returns the defaults.
func DefaultConfig() *Config {
	return &Config{Early: true, MaxBytes: 4 << 20, MaxDepth: jsonsyntax.DefaultMaxDepth}
}

const doc = `Validates the output against the request's response_format JSON
Schema (json_schema, or json_object with a schema). Drafts 2020-12 and 7
are supported; the draft comes from $schema, else 2020-12. External $refs
are refused (nothing is fetched or read from disk); a schema that does not
compile makes the check fail to build with the compiler's error.

While the output streams, it fails as soon as a prefix can no longer
satisfy the schema: a value of the wrong type (known from its first byte),
an unknown key under additionalProperties: false, a complete scalar that
is not in enum / const, an array longer than maxItems, an object closed
without a required key. It follows only subschemas that must hold (not
anyOf/oneOf/not/if branches), so an early failure is always a real one.
It also checks minLength, maxLength, pattern, minimum, maximum, the
exclusive bounds and min/maxProperties on each complete value. When every
subschema uses only keywords it checks (the strict structured-output
subset: type, properties, required, additionalProperties, items, enum,
$ref, ...), its verdict is final and no second parse is needed;
otherwise, at the end it validates the whole document with the library
and reports each violation with its JSON pointer (Path) and the byte span
of the failing value. A duplicate key is judged on each occurrence while
streaming (the full validation then decides, as parsers keep the last).

Output that is not JSON at all fails with invalid_json. Nothing is
released before the end: the document is validated whole.`

// Register adds the check to r.
func Register(r *validator.Registry) {
	r.Register(validator.Spec{
		AnswerOnly: true,
		Name:       Name,
		Summary:    "output must satisfy the response_format JSON Schema (2020-12, 7); fails early on a prefix",
		Doc:        doc,
		Reasons:    []validator.Reason{validator.ReasonSchemaViolation, validator.ReasonInvalidJSON},
		Example:    "assert_format: true\nearly: true\nmax_bytes: 1048576\n",
		Config:     func() any { return DefaultConfig() },
		New: func(cfg any, req *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil {
				c = DefaultConfig()
			}
			if c.MaxBytes < 0 || c.MaxDepth < 0 {
				return nil, fmt.Errorf("json_schema: max_bytes and max_depth must not be negative")
			}
			if req == nil || req.ResponseFormat == nil {
				return nil, nil
			}
			schema := bytes.TrimSpace(req.ResponseFormat.Schema)
			if len(schema) == 0 || string(schema) == "null" {
				return nil, nil
			}
			comp, err := DefaultCache.Compile(schema, Options{AssertFormat: c.AssertFormat})
			if err != nil {
				return nil, fmt.Errorf("json_schema: response_format schema: %w", err)
			}
			return New(comp, c), nil
		},
	})
}

// Validator is the json_schema check for one attempt.
type Validator struct {
	comp     *Compiled
	sc       *jsonsyntax.Scanner
	tr       *tracker
	buf      []byte
	maxBytes int
	over     bool
	findings []validator.Finding
	closed   bool
}

// New returns a validator for one output against a compiled schema.
func New(comp *Compiled, cfg *Config) *Validator {
	if cfg == nil {
		cfg = DefaultConfig()
	}
	v := &Validator{comp: comp, maxBytes: cfg.MaxBytes}
	if v.maxBytes == 0 {
		v.maxBytes = DefaultConfig().MaxBytes
	}
	var h jsonsyntax.Handler
	if cfg.Early {
		v.tr = newTracker(comp)
		h = v.tr
	}
	v.sc = jsonsyntax.NewScanner(cfg.MaxDepth, h)
	return v
}

// Name implements validator.Validator.
func (v *Validator) Name() string { return Name }

// Write implements validator.Validator.
func (v *Validator) Write(p []byte) (int, error) {
	if v.findings != nil {
		return len(p), nil
	}
	if len(v.buf)+len(p) > v.maxBytes {
		at := v.maxBytes
		v.over = true
		v.findings = append(v.findings, validator.Finding{
			Check: Name, Reason: validator.ReasonSchemaViolation, Start: at, End: at + 1,
			Message: fmt.Sprintf("output longer than max_bytes %d: not validated", v.maxBytes),
		})
		return len(p), nil
	}
	v.buf = append(v.buf, p...)
	v.sc.Write(p)
	v.check()
	return len(p), nil
}

// check turns a syntax error or an early schema failure into a finding.
//
// Both can appear in one Write (the scanner runs on after the tracker has
// failed); the one that starts first wins, which is what a byte-by-byte
// feed would have reported, so findings do not depend on the split.
func (v *Validator) check() {
	e := v.sc.Err()
	if e != nil && (v.tr == nil || v.tr.fail == nil || e.Offset < v.tr.fail.start) {
		end := e.Offset + 1
		if end > len(v.buf) {
			end = e.Offset
		}
		f := validator.Finding{Check: Name, Reason: validator.ReasonInvalidJSON, Start: e.Offset, End: end, Message: e.Error()}
		if e.Kind.Repairable() {
			f.Hint = validator.ActionFixSyntax
		}
		v.findings = append(v.findings, f)
		return
	}
	if v.tr != nil && v.tr.fail != nil {
		e := v.tr.fail
		v.findings = append(v.findings, validator.Finding{
			Check: Name, Reason: validator.ReasonSchemaViolation, Start: e.start, End: e.end,
			Message: e.msg, Path: e.pointer,
		})
	}
}

// Settled implements validator.Validator: the document is judged whole,
// so nothing settles before Close.
func (v *Validator) Settled() int {
	if v.closed && v.findings == nil {
		return len(v.buf)
	}
	return 0
}

// Findings implements validator.Validator.
func (v *Validator) Findings() []validator.Finding { return v.findings }

// Close implements validator.Validator: it validates the whole document.
func (v *Validator) Close() {
	if v.closed {
		return
	}
	v.closed = true
	if v.findings != nil {
		return
	}
	if v.sc.Close() != nil {
		v.check()
		return
	}
	if v.tr != nil && v.tr.fail != nil { // a top-level number ends only at Close
		v.check()
		return
	}
	if v.tr != nil && v.comp.Decisive && !v.tr.undecided {
		return // the tracker has judged every keyword of every value
	}
	for _, vio := range v.comp.Validate(v.buf) {
		v.findings = append(v.findings, validator.Finding{
			Check: Name, Reason: validator.ReasonSchemaViolation, Start: vio.Start, End: vio.End,
			Message: vio.Message, Path: vio.Pointer,
		})
	}
}

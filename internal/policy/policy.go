// Package policy decides what Aegis does about the findings of one attempt.
//
// A policy is a YAML file, decoded strictly (an unknown key anywhere is an
// error naming the file and line):
//
//	release: auto          # watermark | buffer | optimistic | auto
//	max_hold: 500ms        # watermark: longest a guard may hold text (0: its deadline)
//	max_retries: 2         # default retries per reason before halt
//	constraints: true      # compile checks from the prompt ("under 50 words")
//	reasoning: check       # check | hide | pass: the model's reasoning
//	log_text: false        # never log prompts or outputs unless true
//	checks:                # <check name>: true | false | {its configuration}
//	  json_syntax: true
//	  banned: {terms: [lorem ipsum]}
//	  stall: false
//	actions:               # <reason code>: how to act on it
//	  repetition_loop: {action: retry_with_correction, risk: medium, max_retries: 1}
//	approval:              # a person may release held tool calls (action: approve)
//	  timeout: 10m         # a call nobody decides on is denied after this
//	guard: {...}           # kept raw for the guard; see DecodeGuard
//	mcp: {...}             # kept raw for the MCP proxy (package mcp)
//
// Each check section is decoded into the Config value of the check's
// validator.Spec, with the same strictness. Sections absent from the file
// keep the defaults of Default: the default check stack enabled, the
// default action table. `release: auto` buffers JSON outputs whole and
// releases everything else at the watermark.
//
// A rule whose action is approve holds the tool calls of the attempt until
// a person decides; without an approval section (nobody to ask) such a
// rule halts instead. data_exfiltration's default rule is approve, so
// private data sent to a destination nobody trusted named waits for a
// person when one is configured and is refused otherwise.
//
// Decide turns findings into a Verdict. It is pure: the worst finding (by
// the risk of its reason, then by position) chooses the reason and the
// action, and an attempt beyond the reason's retry budget halts.
package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Mode is when text is released to the client.
type Mode int

// The release modes.
const (
	// ModeAuto buffers JSON outputs and uses the watermark otherwise.
	ModeAuto Mode = iota
	// ModeWatermark releases up to the point every check has cleared.
	ModeWatermark
	// ModeBuffer releases nothing until the whole output has passed.
	ModeBuffer
	// ModeOptimistic releases at once; a late failure becomes an error event.
	ModeOptimistic
)

var modeNames = [...]string{"auto", "watermark", "buffer", "optimistic"}

func (m Mode) String() string {
	if m >= 0 && int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode parses a release mode name.
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("unknown release mode %q (want %s)", s, strings.Join(modeNames[:], ", "))
}

// MarshalText encodes the mode name.
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText decodes a mode name.
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Resolve returns the concrete mode for an output: auto becomes buffer when
// the output is JSON and watermark otherwise.
func (m Mode) Resolve(jsonOutput bool) Mode {
	if m != ModeAuto {
		return m
	}
	if jsonOutput {
		return ModeBuffer
	}
	return ModeWatermark
}

// Rule says how to act on one reason code.
type Rule struct {
	Action validator.Action `yaml:"action" json:"action"`
	Risk   validator.Risk   `yaml:"risk" json:"risk"`
	// MaxRetries bounds the hidden retries for this reason; the attempt
	// after the last retry halts. Negative means "use the policy's
	// max_retries".
	MaxRetries int `yaml:"max_retries" json:"max_retries"`
}

// Check is one enabled check and its decoded configuration.
type Check struct {
	Name string
	// Config is the value the spec's Config returned, decoded from the
	// policy (nil when the spec takes none). Validators must not modify it:
	// it is shared by every attempt.
	Config any
	Spec   validator.Spec
}

// Policy is a decoded policy. Build one with Default, Parse or Load; the
// value is read-only afterwards and safe for concurrent use.
type Policy struct {
	// Source names where the policy came from ("default" or a file name).
	Source string
	// Version identifies the policy's content: "default", or "sha256:"
	// and the first 16 hex digits of the document's digest. An approval
	// is bound to the version it was asked under.
	Version string
	// Approval configures approval by a person; the zero value has none.
	Approval Approval
	Release  Mode
	// MaxHold bounds, in watermark mode, how long a background check (the
	// guard model) may hold text it has not judged yet. Past it the text
	// is released with a guard_unavailable finding, which the rule for
	// guard_unavailable turns into a note (release) or a halt. Zero means
	// no bound but the check's own deadline.
	MaxHold time.Duration
	// MaxRetries is the retry budget for reasons whose rule does not set one.
	MaxRetries int
	// Constraints enables the checks compiled from the prompt.
	Constraints bool
	// Reasoning is what is done with the model's reasoning (default
	// check).
	Reasoning Reasoning
	// LogText allows logging prompts and outputs.
	LogText bool
	// Checks are the enabled checks, in registry (name) order.
	Checks []Check
	// Rules maps every reason code to its rule.
	Rules map[validator.Reason]Rule
	// Guard is the raw guard section (zero Kind when absent).
	Guard yaml.Node
	// MCP is the raw mcp section, decoded by the MCP proxy (zero Kind
	// when absent).
	MCP yaml.Node
	// Registry is the registry the checks were resolved in.
	Registry *validator.Registry

	// unjudged is where the rule for guard_unavailable was set (see
	// unjudged.go), nil when it is the default.
	unjudged *unjudgedRule
}

// Approval configures approval by a person (the policy's approval
// section).
type Approval struct {
	// Enabled: the section is present, so someone may decide on held
	// calls (the dashboard, `aegis approvals`, the approvals API).
	Enabled bool
	// Timeout is how long a call waits for a decision before it is
	// denied.
	Timeout time.Duration
}

// DefaultApprovalTimeout is how long a held call waits when the approval
// section sets no timeout.
const DefaultApprovalTimeout = 5 * time.Minute

// MaxApprovalTimeout bounds the approval timeout: a held call keeps a
// client's connection and the request's memory.
const MaxApprovalTimeout = 24 * time.Hour

// DefaultChecks are the checks the default policy enables when they are
// registered. banned and regex run only when configured (or compiled from
// the prompt), since they have nothing to check otherwise.
var DefaultChecks = []string{"json_syntax", "json_schema", "tool_call", "tool_policy", "repetition", "stall", "length", "leak"}

// DefaultMaxRetries is the default retry budget per reason.
const DefaultMaxRetries = 2

// DefaultRules returns the default action table, following the design:
// broken JSON or schema retries with a stricter format, loops, drift and
// length retry with a correction, leaks halt.
func DefaultRules() map[validator.Reason]Rule {
	r := func(a validator.Action, risk validator.Risk, retries int) Rule {
		return Rule{Action: a, Risk: risk, MaxRetries: retries}
	}
	rules := map[validator.Reason]Rule{
		validator.ReasonInvalidJSON:       r(validator.ActionRetryStricterFormat, validator.RiskMedium, -1),
		validator.ReasonSchemaViolation:   r(validator.ActionRetryStricterFormat, validator.RiskMedium, -1),
		validator.ReasonMalformedToolCall: r(validator.ActionRetryStricterFormat, validator.RiskMedium, -1),
		validator.ReasonRegexMismatch:     r(validator.ActionRetryWithCorrection, validator.RiskMedium, -1),
		validator.ReasonRepetitionLoop:    r(validator.ActionRetryWithCorrection, validator.RiskMedium, -1),
		validator.ReasonStall:             r(validator.ActionRetryWithCorrection, validator.RiskMedium, 1),
		validator.ReasonLengthExceeded:    r(validator.ActionRetryWithCorrection, validator.RiskLow, -1),
		validator.ReasonInstructionDrift:  r(validator.ActionRetryWithCorrection, validator.RiskLow, -1),
		validator.ReasonBannedContent:     r(validator.ActionRetryWithCorrection, validator.RiskMedium, -1),
		validator.ReasonSystemPromptLeak:  r(validator.ActionHalt, validator.RiskHigh, 0),
		validator.ReasonSecretLeak:        r(validator.ActionHalt, validator.RiskHigh, 0),
		validator.ReasonUnsafeContent:     r(validator.ActionHalt, validator.RiskHigh, 0),
		validator.ReasonPromptInjection:   r(validator.ActionBlock, validator.RiskHigh, 0),
		// Private data to a destination nobody trusted named: a person
		// decides when one is configured, else it is refused (see Rule).
		validator.ReasonDataExfiltration: r(validator.ActionApprove, validator.RiskHigh, 0),
		validator.ReasonUpstreamError:    r(validator.ActionHalt, validator.RiskMedium, 0),
		// The guard fails open by default: its absence is a note, not a failure.
		validator.ReasonGuardUnavailable: r(validator.ActionRelease, validator.RiskLow, 0),
	}
	return rules
}

// Default returns the default policy over validator.Default.
func Default() *Policy { return DefaultFor(validator.Default) }

// DefaultFor returns the default policy over reg: every registered check of
// DefaultChecks enabled with its default configuration.
func DefaultFor(reg *validator.Registry) *Policy {
	p := &Policy{
		Source:      "default",
		Version:     "default",
		Release:     ModeAuto,
		MaxRetries:  DefaultMaxRetries,
		Constraints: true,
		Rules:       DefaultRules(),
		Registry:    reg,
	}
	for _, s := range reg.All() {
		if contains(DefaultChecks, s.Name) {
			p.Checks = append(p.Checks, Check{Name: s.Name, Spec: s, Config: newConfig(s)})
		}
	}
	return p
}

func newConfig(s validator.Spec) any {
	if s.Config == nil {
		return nil
	}
	return s.Config()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Rule returns the rule for reason, with MaxRetries resolved. An unknown
// reason halts at high risk. An approve rule halts when the policy has no
// approval section: there is nobody to ask.
func (p *Policy) Rule(reason validator.Reason) Rule {
	r, ok := p.Rules[reason]
	if !ok {
		return Rule{Action: validator.ActionHalt, Risk: validator.RiskHigh}
	}
	if r.MaxRetries < 0 {
		r.MaxRetries = p.MaxRetries
	}
	if r.Action == validator.ActionApprove && !p.Approval.Enabled {
		r.Action = validator.ActionHalt
	}
	return r
}

// ApprovalTimeout is how long a held call waits for a person.
func (p *Policy) ApprovalTimeout() time.Duration {
	if p.Approval.Timeout > 0 {
		return p.Approval.Timeout
	}
	return DefaultApprovalTimeout
}

// With returns a copy of p with c among its checks, in place of a check
// of the same name: a check built at run time rather than from the file
// (the guard model a command starts and supervises), which then enters
// every attempt through the policy like any other.
func (p *Policy) With(c Check) *Policy {
	q := *p
	q.Checks = nil
	for _, o := range p.Checks {
		if o.Name != c.Name {
			q.Checks = append(q.Checks, o)
		}
	}
	q.Checks = append(q.Checks, c)
	return &q
}

// Enabled returns the enabled check named name.
func (p *Policy) Enabled(name string) (Check, bool) {
	for _, c := range p.Checks {
		if c.Name == name {
			return c, true
		}
	}
	return Check{}, false
}

// Load reads and decodes the policy file at path over validator.Default.
func Load(path string) (*Policy, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	return Parse(b, path, validator.Default)
}

// file is the document shape; check and action sections stay nodes so they
// can be decoded per check with line numbers.
type file struct {
	Release     yaml.Node `yaml:"release"`
	MaxHold     *string   `yaml:"max_hold"`
	MaxRetries  *int      `yaml:"max_retries"`
	Constraints *bool     `yaml:"constraints"`
	Reasoning   yaml.Node `yaml:"reasoning"`
	LogText     *bool     `yaml:"log_text"`
	Checks      yaml.Node `yaml:"checks"`
	Actions     yaml.Node `yaml:"actions"`
	Guard       yaml.Node `yaml:"guard"`
	MCP         yaml.Node `yaml:"mcp"`
	Approval    yaml.Node `yaml:"approval"`
}

// Parse decodes a policy document; name is used in errors. Sections left
// out keep the defaults of DefaultFor(reg).
func Parse(data []byte, name string, reg *validator.Registry) (*Policy, error) {
	wrap := func(err error) error { return fmt.Errorf("policy %s: %w", name, err) }
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return nil, wrap(FixYAMLLine(err))
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, wrap(fmt.Errorf("line %d: a policy is one YAML document", extra.Line))
	}
	p := DefaultFor(reg)
	p.Source = name
	sum := sha256.Sum256(data)
	p.Version = "sha256:" + hex.EncodeToString(sum[:8])
	if f.Release.Kind != 0 {
		m, err := ParseMode(f.Release.Value)
		if err != nil || f.Release.Kind != yaml.ScalarNode {
			return nil, wrap(fmt.Errorf("line %d: release: unknown release mode %q (want %s)", f.Release.Line, f.Release.Value, strings.Join(modeNames[:], ", ")))
		}
		p.Release = m
	}
	if f.MaxHold != nil {
		d, err := time.ParseDuration(*f.MaxHold)
		if err != nil || d < 0 {
			return nil, wrap(fmt.Errorf("max_hold %q: want a non-negative duration such as 500ms", *f.MaxHold))
		}
		p.MaxHold = d
	}
	if f.MaxRetries != nil {
		if *f.MaxRetries < 0 || *f.MaxRetries > 10 {
			return nil, wrap(fmt.Errorf("max_retries %d out of range 0..10", *f.MaxRetries))
		}
		p.MaxRetries = *f.MaxRetries
	}
	if f.Constraints != nil {
		p.Constraints = *f.Constraints
	}
	if f.LogText != nil {
		p.LogText = *f.LogText
	}
	if f.Reasoning.Kind != 0 {
		r, err := ParseReasoning(f.Reasoning.Value)
		if err != nil || f.Reasoning.Kind != yaml.ScalarNode {
			return nil, wrap(fmt.Errorf("line %d: reasoning: unknown reasoning mode %q (want %s)", f.Reasoning.Line, f.Reasoning.Value, strings.Join(reasoningNames[:], ", ")))
		}
		p.Reasoning = r
	}
	if err := p.decodeChecks(&f.Checks, reg); err != nil {
		return nil, wrap(err)
	}
	if err := p.failOpenShorthands(&f.Checks, &f.Guard); err != nil {
		return nil, wrap(err)
	}
	if err := p.decodeApproval(&f.Approval); err != nil {
		return nil, wrap(err)
	}
	if err := p.decodeActions(&f.Actions); err != nil {
		return nil, wrap(err)
	}
	p.Guard = f.Guard
	p.MCP = f.MCP
	return p, nil
}

func (p *Policy) decodeChecks(n *yaml.Node, reg *validator.Registry) error {
	if n.Kind == 0 || isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: checks must be a mapping of check name to configuration", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		spec, ok := reg.Lookup(k.Value)
		if !ok {
			return fmt.Errorf("line %d: unknown check %q (see `aegis validators`)", k.Line, k.Value)
		}
		var enabled bool
		cfg := newConfig(spec)
		switch {
		case v.Kind == yaml.ScalarNode && v.Tag == "!!bool":
			if err := v.Decode(&enabled); err != nil {
				return fmt.Errorf("line %d: check %s: %w", v.Line, k.Value, err)
			}
		case isNull(v):
			enabled = true
		case v.Kind == yaml.MappingNode:
			enabled = true
			if cfg == nil {
				if len(v.Content) > 0 {
					return fmt.Errorf("line %d: check %s takes no configuration", v.Line, k.Value)
				}
				break
			}
			if err := DecodeStrict(v, cfg); err != nil {
				return fmt.Errorf("check %s: %w", k.Value, err)
			}
		default:
			return fmt.Errorf("line %d: check %s: want true, false or a mapping", v.Line, k.Value)
		}
		p.setCheck(Check{Name: k.Value, Spec: spec, Config: cfg}, enabled)
	}
	return nil
}

// setCheck enables (replacing any default) or disables a check, keeping
// the checks in name order.
func (p *Policy) setCheck(c Check, enabled bool) {
	out := p.Checks[:0:0]
	for _, x := range p.Checks {
		if x.Name != c.Name {
			out = append(out, x)
		}
	}
	if enabled {
		i := 0
		for i < len(out) && out[i].Name < c.Name {
			i++
		}
		out = append(out, Check{})
		copy(out[i+1:], out[i:])
		out[i] = c
	}
	p.Checks = out
}

func (p *Policy) decodeActions(n *yaml.Node) error {
	if n.Kind == 0 || isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: actions must be a mapping of reason code to rule", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		reason := validator.Reason(k.Value)
		if reason == validator.ReasonNone || !reason.Valid() {
			return fmt.Errorf("line %d: unknown reason code %q", k.Line, k.Value)
		}
		rule := p.Rule(reason)
		rule.MaxRetries = -1
		if old, ok := p.Rules[reason]; ok {
			rule.MaxRetries = old.MaxRetries
		}
		var raw struct {
			Action     *string `yaml:"action"`
			Risk       *string `yaml:"risk"`
			MaxRetries *int    `yaml:"max_retries"`
		}
		if err := DecodeStrict(v, &raw); err != nil {
			return fmt.Errorf("actions %s: %w", k.Value, err)
		}
		if raw.Action != nil {
			a := validator.Action(*raw.Action)
			if !a.Valid() {
				return fmt.Errorf("line %d: actions %s: unknown action %q", v.Line, k.Value, *raw.Action)
			}
			if a == validator.ActionApprove && !p.Approval.Enabled {
				return fmt.Errorf("line %d: actions %s: action approve needs an approval section (approval: {timeout: 10m}) so that a person can decide", v.Line, k.Value)
			}
			rule.Action = a
		}
		if raw.Risk != nil {
			r, err := validator.ParseRisk(*raw.Risk)
			if err != nil {
				return fmt.Errorf("line %d: actions %s: %w", v.Line, k.Value, err)
			}
			rule.Risk = r
		}
		if raw.MaxRetries != nil {
			if *raw.MaxRetries < 0 || *raw.MaxRetries > 10 {
				return fmt.Errorf("line %d: actions %s: max_retries %d out of range 0..10", v.Line, k.Value, *raw.MaxRetries)
			}
			rule.MaxRetries = *raw.MaxRetries
		}
		p.Rules[reason] = rule
		if reason == validator.ReasonGuardUnavailable && raw.Action != nil {
			if err := p.actionsUnjudged(v.Line); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeApproval decodes the approval section: null or a mapping enables
// approval, with an optional timeout.
func (p *Policy) decodeApproval(n *yaml.Node) error {
	if n.Kind == 0 {
		return nil
	}
	p.Approval.Enabled = true
	if isNull(n) {
		return nil
	}
	var raw struct {
		Timeout *string `yaml:"timeout"`
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: approval must be a mapping such as {timeout: 10m}", n.Line)
	}
	if err := DecodeStrict(n, &raw); err != nil {
		return fmt.Errorf("approval: %w", err)
	}
	if raw.Timeout != nil {
		d, err := time.ParseDuration(*raw.Timeout)
		if err != nil || d <= 0 || d > MaxApprovalTimeout {
			return fmt.Errorf("line %d: approval: timeout %q: want a positive duration up to %s, such as 10m", n.Line, *raw.Timeout, MaxApprovalTimeout)
		}
		p.Approval.Timeout = d
	}
	return nil
}

// DecodeGuard strictly decodes the guard section into v (a pointer to the
// guard's configuration struct). It leaves v untouched when the section is
// absent.
func (p *Policy) DecodeGuard(v any) error {
	if p.Guard.Kind == 0 || isNull(&p.Guard) {
		return nil
	}
	if err := DecodeStrict(&p.Guard, v); err != nil {
		return fmt.Errorf("policy %s: guard: %w", p.Source, err)
	}
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// DecodeStrict decodes n into v (a pointer), rejecting mapping keys that
// name no field of v's struct types, with the key's line. yaml.v3's
// KnownFields works only on a Decoder over bytes; checking the node first
// keeps the original line numbers.
func DecodeStrict(n *yaml.Node, v any) error {
	if err := checkKeys(n, reflect.TypeOf(v)); err != nil {
		return err
	}
	if err := n.Decode(v); err != nil {
		return err
	}
	return nil
}

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

func checkKeys(n *yaml.Node, t reflect.Type) error {
	if t == nil {
		return nil
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		if t.Implements(unmarshalerType) {
			return nil
		}
		t = t.Elem()
	}
	if t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil // a type error; Decode reports it with its line
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" {
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				ft, ok = fields["*"] // an inline map takes any key
			}
			if !ok {
				return fmt.Errorf("line %d: unknown field %q (known: %s)", k.Line, k.Value, strings.Join(sortedKeys(fields), ", "))
			}
			if err := checkKeys(v, ft); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind == yaml.SequenceNode {
			for _, c := range n.Content {
				if err := checkKeys(c, t.Elem()); err != nil {
					return err
				}
			}
		}
	case reflect.Map:
		if n.Kind == yaml.MappingNode {
			for i := 1; i < len(n.Content); i += 2 {
				if err := checkKeys(n.Content[i], t.Elem()); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// yamlFields maps the YAML keys of struct type t (yaml.v3 rules: the yaml
// tag, else the lower-cased field name; inline structs flattened) to their
// types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range yamlFields(ft) {
					out[k] = v
				}
				continue
			}
			if ft.Kind() == reflect.Map {
				out["*"] = ft.Elem()
				continue
			}
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys(m map[string]reflect.Type) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	for i := 1; i < len(keys); i++ {
		for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
			keys[j], keys[j-1] = keys[j-1], keys[j]
		}
	}
	return keys
}

// ExampleDocument wraps a spec's Example (the body of its section) into a
// whole policy document that enables the check:
//
//	checks:
//	  length:
//	    max_words: 50
//
// A one-line example ("true", "{max_words: 50}") stays on the name's line.
func ExampleDocument(s validator.Spec) string {
	body := strings.TrimRight(s.Example, "\n")
	if body == "" {
		body = "true"
	}
	if !strings.Contains(body, "\n") && !strings.Contains(body, ": ") {
		return "checks:\n  " + s.Name + ": " + body + "\n"
	}
	if !strings.Contains(body, "\n") && strings.HasPrefix(body, "{") {
		return "checks:\n  " + s.Name + ": " + body + "\n"
	}
	var sb strings.Builder
	sb.WriteString("checks:\n  " + s.Name + ":\n")
	for _, l := range strings.Split(body, "\n") {
		sb.WriteString("    " + l + "\n")
	}
	return sb.String()
}

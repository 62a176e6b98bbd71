package policy

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

type lenConfig struct {
	MaxWords int `yaml:"max_words"`
	Nested   struct {
		A int `yaml:"a"`
	} `yaml:"nested"`
	Timeout time.Duration `yaml:"timeout"`
}

func testRegistry() *validator.Registry {
	reg := &validator.Registry{}
	newNil := func(any, *validator.Request) (validator.Validator, error) { return nil, nil }
	reg.Register(validator.Spec{Name: "fake_len", Config: func() any { return &lenConfig{MaxWords: 500} }, New: newNil})
	reg.Register(validator.Spec{Name: "fake_plain", New: newNil})
	reg.Register(validator.Spec{Name: "repetition", New: newNil})
	reg.Register(validator.Spec{Name: "json_syntax", New: newNil})
	return reg
}

func TestParseExample(t *testing.T) {
	b, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := Parse(b, "example.yaml", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c, ok := p.Enabled("fake_len")
	if !ok || c.Config.(*lenConfig).MaxWords != 120 {
		t.Fatalf("fake_len = %+v, %v", c, ok)
	}
	if _, ok := p.Enabled("repetition"); !ok {
		t.Error("default check repetition not kept")
	}
	if p.Release != ModeAuto || p.MaxRetries != 2 || !p.Constraints || p.LogText {
		t.Errorf("top level = %v %d %v %v", p.Release, p.MaxRetries, p.Constraints, p.LogText)
	}
	if r := p.Rule(validator.ReasonRepetitionLoop); r.MaxRetries != 1 || r.Action != validator.ActionRetryWithCorrection {
		t.Errorf("repetition rule = %+v", r)
	}
	if r := p.Rule(validator.ReasonGuardUnavailable); r.Action != validator.ActionHalt || r.Risk != validator.RiskMedium {
		t.Errorf("guard rule = %+v", r)
	}
	var g struct {
		FailOpen bool          `yaml:"fail_open"`
		Deadline time.Duration `yaml:"deadline"`
	}
	g.FailOpen = true
	if err := p.DecodeGuard(&g); err != nil || g.FailOpen || g.Deadline != 250*time.Millisecond {
		t.Errorf("guard = %+v, %v", g, err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, doc, want string
	}{
		{"unknown top key", "release: auto\nmax_retires: 3\n", "line 2"},
		{"bad mode", "release: sometimes\n", "sometimes"},
		{"unknown check", "checks:\n  fake_len: true\n  nope: {}\n", `line 3: unknown check "nope"`},
		{"unknown check field", "checks:\n  fake_len:\n    max_words: 3\n    max_wrds: 4\n", `line 4: unknown field "max_wrds"`},
		{"unknown nested field", "checks:\n  fake_len:\n    nested: {b: 1}\n", `line 3: unknown field "b"`},
		{"type error", "checks:\n  fake_len:\n    max_words: many\n", "line 3"},
		{"config on plain", "checks:\n  fake_plain: {x: 1}\n", "takes no configuration"},
		{"check scalar", "checks:\n  fake_len: 3\n", "line 2"},
		{"unknown reason", "actions:\n  oops: {action: halt}\n", `line 2: unknown reason code "oops"`},
		{"unknown action", "actions:\n  stall: {action: explode}\n", `unknown action "explode"`},
		{"unknown rule key", "actions:\n  stall: {action: halt, retries: 1}\n", `line 2: unknown field "retries"`},
		{"bad risk", "actions:\n  stall: {risk: severe}\n", "severe"},
		{"retries range", "max_retries: 99\n", "out of range"},
		{"two documents", "release: auto\n---\nrelease: buffer\n", "one YAML document"},
		{"bad reasoning", "release: auto\nreasoning: show\n", `line 2: reasoning: unknown reasoning mode "show"`},
		{"reasoning not scalar", "reasoning: [check]\n", "line 1: reasoning"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), "p.yaml", testRegistry())
			if err == nil {
				t.Fatalf("no error")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "p.yaml") {
				t.Errorf("error %q does not name %q and the file", err, tc.want)
			}
		})
	}
}

func TestParseEmptyIsDefault(t *testing.T) {
	for _, doc := range []string{"", "# nothing\n", "checks:\nactions:\n"} {
		p, err := Parse([]byte(doc), "e.yaml", testRegistry())
		if err != nil {
			t.Fatalf("%q: %v", doc, err)
		}
		d := DefaultFor(testRegistry())
		if len(p.Checks) != len(d.Checks) || p.MaxRetries != d.MaxRetries {
			t.Errorf("%q: %d checks, want %d", doc, len(p.Checks), len(d.Checks))
		}
	}
}

func TestDefaultChecks(t *testing.T) {
	p := DefaultFor(testRegistry())
	var names []string
	for _, c := range p.Checks {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "json_syntax,repetition" {
		t.Errorf("default checks = %s", got)
	}
	p2, err := Parse([]byte("checks: {repetition: false, fake_plain: true}"), "x", testRegistry())
	if err != nil {
		t.Fatal(err)
	}
	names = nil
	for _, c := range p2.Checks {
		names = append(names, c.Name)
	}
	if got := strings.Join(names, ","); got != "fake_plain,json_syntax" {
		t.Errorf("checks = %s", got)
	}
}

func TestModes(t *testing.T) {
	for _, m := range []Mode{ModeAuto, ModeWatermark, ModeBuffer, ModeOptimistic} {
		got, err := ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("round trip %v: %v %v", m, got, err)
		}
	}
	if ModeAuto.Resolve(true) != ModeBuffer || ModeAuto.Resolve(false) != ModeWatermark || ModeOptimistic.Resolve(true) != ModeOptimistic {
		t.Error("Resolve")
	}
	if Mode(9).String() != "Mode(9)" {
		t.Error(Mode(9).String())
	}
}

func FuzzParse(f *testing.F) {
	b, _ := os.ReadFile("testdata/example.yaml")
	f.Add(string(b))
	f.Add("checks:\n  fake_len: {nested: {a: 1}}\n")
	f.Add("actions: {stall: {max_retries: 3}}")
	f.Add("release: [1, 2]")
	reg := testRegistry()
	f.Fuzz(func(t *testing.T, doc string) {
		p, err := Parse([]byte(doc), "f", reg)
		if err != nil {
			return
		}
		for _, r := range validator.Reasons {
			rule := p.Rule(r)
			if !rule.Action.Valid() || rule.MaxRetries < 0 {
				t.Fatalf("invalid rule %v: %+v", r, rule)
			}
		}
	})
}

func TestExampleDocument(t *testing.T) {
	tests := []struct{ example, want string }{
		{"", "checks:\n  x: true\n"},
		{"true\n", "checks:\n  x: true\n"},
		{"{max_words: 3}\n", "checks:\n  x: {max_words: 3}\n"},
		{"max_words: 3\nnested: {a: 1}\n", "checks:\n  x:\n    max_words: 3\n    nested: {a: 1}\n"},
	}
	for _, tc := range tests {
		if got := ExampleDocument(validator.Spec{Name: "x", Example: tc.example}); got != tc.want {
			t.Errorf("ExampleDocument(%q) = %q, want %q", tc.example, got, tc.want)
		}
	}
}

func TestWithReplacesByName(t *testing.T) {
	p := DefaultFor(testRegistry())
	spec := validator.Spec{Name: "runtime", New: func(any, *validator.Request) (validator.Validator, error) { return nil, nil }}
	q := p.With(Check{Name: "runtime", Spec: spec}).With(Check{Name: "runtime", Spec: spec})
	if len(q.Checks) != len(p.Checks)+1 {
		t.Fatalf("%d checks, want %d", len(q.Checks), len(p.Checks)+1)
	}
	if _, ok := p.Enabled("runtime"); ok {
		t.Fatal("With changed the original policy")
	}
	if _, ok := q.Enabled("runtime"); !ok {
		t.Fatal("the run-time check is not enabled")
	}
}

// TestFailOpenIsTheGuardUnavailableRule: every fail_open key is a shorthand
// for the one rule for guard_unavailable; settings that disagree are an
// error naming both.
func TestFailOpenIsTheGuardUnavailableRule(t *testing.T) {
	reg := testRegistry()
	type guardConfig struct {
		FailOpen *bool `yaml:"fail_open"`
	}
	reg.Register(validator.Spec{Name: "guard", Config: func() any { return &guardConfig{} },
		New: func(any, *validator.Request) (validator.Validator, error) { return nil, nil }})
	for _, tc := range []struct {
		name, doc string
		want      validator.Action
		err       string
	}{
		{"default", "", validator.ActionRelease, ""},
		{"guard section", "guard: {fail_open: false}\n", validator.ActionHalt, ""},
		{"guard check", "checks: {guard: {fail_open: false}}\n", validator.ActionHalt, ""},
		{"open", "guard: {fail_open: true}\n", validator.ActionRelease, ""},
		{"agreeing action", "guard: {fail_open: false}\nactions: {guard_unavailable: {action: halt}}\n", validator.ActionHalt, ""},
		{"contradicting action", "guard: {fail_open: false}\nactions: {guard_unavailable: {action: release}}\n", "",
			"line 2: actions.guard_unavailable (release) contradicts line 1: guard.fail_open (halt)"},
		{"contradicting keys", "checks: {guard: {fail_open: true}}\nguard: {fail_open: false}\n", "",
			"line 2: guard.fail_open (halt) contradicts line 1: checks.guard.fail_open (release)"},
		{"not a bool", "guard: {fail_open: maybe}\n", "", "line 1: fail_open: want true or false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.doc), "p.yaml", reg)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a := p.Rule(validator.ReasonGuardUnavailable).Action; a != tc.want {
				t.Errorf("rule %s, want %s", a, tc.want)
			}
		})
	}
	p, _ := Parse([]byte("actions: {guard_unavailable: {action: release}}\n"), "p.yaml", testRegistry())
	if _, err := p.WithFailOpen(false, "guard_server.fail_open"); err == nil || !strings.Contains(err.Error(), "guard_server.fail_open (halt) contradicts line 1: actions.guard_unavailable") {
		t.Errorf("WithFailOpen over a contradicting policy: %v", err)
	}
	q, err := Default().WithFailOpen(false, "guard_server.fail_open")
	if err != nil || q.Rule(validator.ReasonGuardUnavailable).Action != validator.ActionHalt || Default().Rule(validator.ReasonGuardUnavailable).Action != validator.ActionRelease {
		t.Errorf("WithFailOpen(false) on the default: %v", err)
	}
}

func TestReasoningModes(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      Reasoning
	}{
		{"default", "", ReasoningCheck},
		{"check", "reasoning: check\n", ReasoningCheck},
		{"hide", "reasoning: hide\n", ReasoningHide},
		{"pass", "reasoning: pass\n", ReasoningPass},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse([]byte(tc.doc), "p.yaml", testRegistry())
			if err != nil {
				t.Fatal(err)
			}
			if p.Reasoning != tc.want || p.Reasoning.String() != tc.want.String() {
				t.Errorf("reasoning = %s, want %s", p.Reasoning, tc.want)
			}
		})
	}
	if got := Reasoning(7).String(); got != "Reasoning(7)" {
		t.Errorf("String() = %q", got)
	}
}

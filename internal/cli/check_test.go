package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/checks"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

func runCheckCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, &IO{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return out.String(), errb.String(), code
}

func TestCheckOrderAndMalformed(t *testing.T) {
	var in strings.Builder
	for i := range 300 {
		switch {
		case i == 5:
			in.WriteString("{not json\n")
		case i == 7:
			in.WriteString("\n") // blank lines are skipped
		default:
			fmt.Fprintf(&in, `{"id":"c%d","request":{"messages":[{"role":"user","content":"Say hi."}]},"output":"Hi there, nice to meet you."}`+"\n", i)
		}
	}
	out, _, code := runCheckCLI(t, in.String(), "check", "--workers", "3")
	if code != ExitFailure {
		t.Errorf("exit %d, want %d (a malformed line fails)", code, ExitFailure)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 299 {
		t.Fatalf("%d verdict lines, want 299", len(lines))
	}
	n := 0
	for i, l := range lines {
		var v struct {
			ID, Verdict, Error string
		}
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if n == 5 {
			if v.Verdict != "fail" || !strings.Contains(v.Error, "stdin:6:") {
				t.Errorf("malformed line verdict %+v", v)
			}
			n++
			if n == 7 {
				n++
			}
			continue
		}
		if v.ID != fmt.Sprintf("c%d", n) || v.Verdict != "pass" {
			t.Errorf("line %d: %+v, want id c%d pass", i, v, n)
		}
		n++
		if n == 7 {
			n++
		}
	}
}

func TestCheckExitCodes(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	os.WriteFile(good, []byte(`{"id":"a","request":{"messages":[]},"output":"ok"}`+"\n"), 0o600)
	badPolicy := filepath.Join(dir, "p.yaml")
	os.WriteFile(badPolicy, []byte("relase: auto\n"), 0o600)
	tests := []struct {
		name    string
		args    []string
		code    int
		errLike string
	}{
		{"all pass", []string{"check", good}, ExitOK, ""},
		{"missing file", []string{"check", good, filepath.Join(dir, "nope.jsonl")}, ExitUsage, "nope.jsonl"},
		{"bad policy", []string{"check", "--policy", badPolicy, good}, ExitUsage, "line 1"},
		{"missing policy", []string{"check", "--policy", filepath.Join(dir, "x.yaml"), good}, ExitUsage, "x.yaml"},
		{"bad attempt", []string{"check", "--attempt", "0", good}, ExitUsage, "attempt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, errs, code := runCheckCLI(t, "", tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.errLike) {
				t.Errorf("exit %d stderr %q, want %d and %q", code, errs, tc.code, tc.errLike)
			}
		})
	}
}

func TestCheckLongLine(t *testing.T) {
	long := `{"id":"big","request":{"messages":[]},"output":"` + strings.Repeat("a", 17<<20) + `"}`
	in := long + "\n" + `{"id":"after","request":{"messages":[]},"output":"ok"}` + "\n"
	out, _, code := runCheckCLI(t, in, "check")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != ExitFailure || len(lines) != 2 || !strings.Contains(lines[0], "stdin:1: line longer than") || !strings.Contains(lines[1], `"after"`) {
		t.Errorf("exit %d, out %.300q", code, out)
	}
}

func TestValidatorsCommand(t *testing.T) {
	out, _, code := runCheckCLI(t, "", "validators", "--json")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Checks  []map[string]any `json:"checks"`
		Reasons []struct {
			Reason, Action string
		} `json:"reasons"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Reasons) != len(validator.Reasons) || doc.Reasons[0].Reason != "invalid_json" {
		t.Errorf("reasons = %+v", doc.Reasons)
	}
	out, _, code = runCheckCLI(t, "", "validators")
	if code != ExitOK || !strings.Contains(out, "secret_leak") {
		t.Errorf("text listing: exit %d %q", code, out)
	}
}

// TestValidatorExamplesParse: every registered check's example policy
// (shown by `aegis validators`) decodes strictly and enables that check.
func TestValidatorExamplesParse(t *testing.T) {
	checks.RegisterDefault()
	specs := validator.Default.All()
	if len(specs) == 0 {
		t.Fatal("no checks registered")
	}
	for _, s := range specs {
		p, err := policy.Parse([]byte(policy.ExampleDocument(s)), s.Name+" example", validator.Default)
		if err != nil {
			t.Errorf("%s: example does not parse: %v", s.Name, err)
			continue
		}
		if _, ok := p.Enabled(s.Name); !ok {
			t.Errorf("%s: example does not enable the check", s.Name)
		}
	}
}

// TestCheckRealVerdicts runs cases through the real checks linked into the
// binary: a failing case exits 1 with its reason and action, in order.
func TestCheckRealVerdicts(t *testing.T) {
	in := strings.Join([]string{
		`{"id":"ok","request":{"messages":[{"role":"user","content":"Say hi in under 10 words."}]},"output":"Hi there!"}`,
		`{"id":"long","request":{"messages":[{"role":"user","content":"Say hi in under 5 words."}]},"output":"Hello there, it is very nice to meet you today."}`,
		`{"id":"json","request":{"messages":[{"role":"user","content":"JSON please"}],"response_format":{"type":"json_object"}},"output":"{'a': 1}"}`,
		`{"id":"tool","request":{"messages":[{"role":"user","content":"weather"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]},"output":"","tool_calls":[{"id":"c","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}`,
	}, "\n") + "\n"
	out, _, code := runCheckCLI(t, in, "check")
	if code != ExitFailure {
		t.Fatalf("exit %d, want 1", code)
	}
	want := []struct{ id, verdict, reason, action string }{
		{"ok", "pass", "", "release"},
		{"long", "fail", "length_exceeded", "retry_with_correction"},
		{"json", "fail", "invalid_json", ""},
		{"tool", "fail", "malformed_tool_call", "retry_with_stricter_format"},
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines: %s", len(lines), out)
	}
	for i, w := range want {
		var v struct {
			ID, Verdict, Action string
			Reason              *string
		}
		if err := json.Unmarshal([]byte(lines[i]), &v); err != nil {
			t.Fatal(err)
		}
		reason := ""
		if v.Reason != nil {
			reason = *v.Reason
		}
		if v.ID != w.id || v.Verdict != w.verdict || reason != w.reason || (w.action != "" && v.Action != w.action) {
			t.Errorf("line %d: %s", i, lines[i])
		}
	}
}

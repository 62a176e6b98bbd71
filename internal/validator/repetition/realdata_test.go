package repetition

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

// sharedDir finds ../shared (the team's datasets) by walking up from the
// working directory. Tests that need it fail when integration tests are
// mandatory (CI) and skip otherwise.
func sharedDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if fi, err := os.Stat(filepath.Join(dir, "shared", "datasets")); err == nil && fi.IsDir() {
			return filepath.Join(dir, "shared")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if testbed.Mandatory() {
		t.Fatal("../shared/datasets not found above the working directory")
	}
	t.Skip("../shared/datasets not found; skipping the real-data test")
	return ""
}

// xstestCompletions returns the real model answers of XSTest (GPT-4 and
// Mistral-7B-Instruct, 900 in all), keyed by model and id.
func xstestCompletions(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range []string{"gpt4", "mistralinstruct"} {
		p := filepath.Join(sharedDir(t), "datasets", "xstest", "model_completions", "xstest_v2_completions_"+m+".csv")
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, r := range rows[1:] {
			out[m+"/"+r[0]] = r[3]
		}
	}
	return out
}

// TestXSTestCompletionsPass runs 900 real model answers (refusals, how-tos,
// lists, code) through the detector in every split. None is a loop, so any
// finding is a false alarm.
func TestXSTestCompletionsPass(t *testing.T) {
	comps := xstestCompletions(t)
	alarms := 0
	for id, text := range comps {
		fs := validatortest.SplitIndependent(t, newDefault, text)
		if len(fs) > 0 {
			alarms++
			t.Errorf("%s: false alarm %s at %d: %q", id, fs[0].Message, fs[0].Start, text[fs[0].Start:fs[0].End])
		}
	}
	t.Logf("xstest completions: %d real answers, %d flagged (false-positive rate %.4f)", len(comps), alarms, float64(alarms)/float64(len(comps)))
}

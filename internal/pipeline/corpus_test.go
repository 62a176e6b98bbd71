package pipeline

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// corpusCase is a Case with the label the corpus expects: "pass" or a
// reason code.
type corpusCase struct {
	Case
	Expect string `json:"expect"`
}

func loadCorpus(t testing.TB) []corpusCase {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus/*.jsonl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus files: %v", err)
	}
	var out []corpusCase
	ids := map[string]bool{}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			var c corpusCase
			if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
				t.Fatalf("%s:%d: %v", f, n, err)
			}
			if c.Expect != "pass" && !validator.Reason(c.Expect).Valid() {
				t.Fatalf("%s:%d: bad expect %q", f, n, c.Expect)
			}
			if ids[c.IDString()] {
				t.Fatalf("%s:%d: duplicate id %s", f, n, c.IDString())
			}
			ids[c.IDString()] = true
			out = append(out, c)
		}
		fh.Close()
	}
	return out
}

func corpusPolicy(t testing.TB) *policy.Policy {
	t.Helper()
	b, err := os.ReadFile("testdata/corpus/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse(b, "testdata/corpus/policy.yaml", validator.Default)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCorpus runs the evaluation corpus through the default policy (plus
// the regex rules of testdata/corpus/policy.yaml) and reports precision
// and recall per reason. Thresholds guard against regressions; the
// numbers are logged with -v.
func TestCorpus(t *testing.T) {
	cases := loadCorpus(t)
	pol := corpusPolicy(t)
	type counts struct{ tp, fp, fn int }
	per := map[string]*counts{}
	get := func(k string) *counts {
		if per[k] == nil {
			per[k] = &counts{}
		}
		return per[k]
	}
	var wrong []string
	for _, c := range cases {
		v, err := CheckCase(pol, &c.Case, 1)
		if err != nil {
			t.Fatalf("%s: %v", c.IDString(), err)
		}
		got := "pass"
		if v.Verdict == validator.Fail {
			got = string(v.Reason)
		}
		if got == c.Expect {
			get(got).tp++
			continue
		}
		get(got).fp++
		get(c.Expect).fn++
		var fs []string
		for _, f := range v.Findings {
			fs = append(fs, fmt.Sprintf("%s/%s@%d %q", f.Check, f.Reason, f.Start, f.Message))
		}
		wrong = append(wrong, fmt.Sprintf("%s: want %s, got %s %v", c.IDString(), c.Expect, got, fs))
	}
	keys := make([]string, 0, len(per))
	for k := range per {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tot := counts{}
	for _, k := range keys {
		c := per[k]
		prec := ratio(c.tp, c.tp+c.fp)
		rec := ratio(c.tp, c.tp+c.fn)
		t.Logf("%-22s tp %3d fp %2d fn %2d  precision %5.1f%%  recall %5.1f%%", k, c.tp, c.fp, c.fn, 100*prec, 100*rec)
		if k != "pass" {
			tot.tp += c.tp
			tot.fp += c.fp
			tot.fn += c.fn
		}
	}
	// The alarm view, whatever the reason: benign cases flagged, failing
	// cases passed.
	falseAlarms, missed := 0, 0
	if p := per["pass"]; p != nil {
		falseAlarms, missed = p.fn, p.fp
	}
	t.Logf("%d cases; %d benign flagged (false alarms), %d failures passed (missed); reason exact on %d/%d failing cases",
		len(cases), falseAlarms, missed, tot.tp, tot.tp+tot.fn)
	for _, w := range wrong {
		t.Logf("mismatch %s", w)
	}
	if len(cases) < 150 {
		t.Errorf("corpus has %d cases, want at least 150", len(cases))
	}
	if exact := ratio(tot.tp, tot.tp+tot.fn); exact < 0.95 {
		t.Errorf("reason exact on %.1f%% of failing cases, want at least 95%%", 100*exact)
	}
	if falseAlarms > maxFalseAlarms || missed > maxMissed {
		t.Errorf("%d false alarms (max %d), %d missed (max %d)", falseAlarms, maxFalseAlarms, missed, maxMissed)
	}
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}

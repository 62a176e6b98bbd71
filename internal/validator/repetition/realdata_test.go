package repetition

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

// xstestCompletions returns the real model answers of XSTest (GPT-4 and
// Mistral-7B-Instruct, 900 in all), keyed by model and id.
func xstestCompletions(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range []string{"gpt4", "mistralinstruct"} {
		p := filepath.Join(testbed.Shared(t, "datasets"), "xstest", "model_completions", "xstest_v2_completions_"+m+".csv")
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

// TestJailbreakBenchResponses scans the 1,637 real model responses of the
// JailbreakBench artifacts (GPT-3.5, GPT-4, Llama-2, Vicuna). The one
// response the detector flags was read by hand and is a real degenerate
// loop (GCG/gpt-3.5-turbo-1106 #16, a reversed question repeated over and
// over); the others were not reviewed one by one, so this bounds false
// alarms rather than proving recall. The test fails when that loop is
// missed or more than 1% of responses are flagged.
func TestJailbreakBenchResponses(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(testbed.Shared(t, "datasets"), "jailbreakbench-artifacts", "*", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no artifact files (%v)", err)
	}
	n, flagged, sawKnownLoop := 0, 0, false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Jailbreaks []struct {
				Response *string `json:"response"`
			} `json:"jailbreaks"`
		}
		if err := json.Unmarshal(b, &a); err != nil {
			continue // attack-info.json and friends
		}
		id := filepath.Base(filepath.Dir(filepath.Dir(f))) + "/" + filepath.Base(f)
		for i, j := range a.Jailbreaks {
			if j.Response == nil {
				continue
			}
			n++
			fs := validatortest.SplitIndependent(t, newDefault, *j.Response)
			if len(fs) > 0 {
				flagged++
				t.Logf("%s #%d: %s", id, i, fs[0].Message)
				if id == "GCG/gpt-3.5-turbo-1106.json" && i == 16 {
					sawKnownLoop = true
				}
			}
		}
	}
	t.Logf("jailbreakbench responses: %d, flagged %d", n, flagged)
	if !sawKnownLoop {
		t.Error("the known loop (GCG/gpt-3.5-turbo-1106 #16) was not flagged")
	}
	if flagged*100 > n {
		t.Errorf("%d of %d responses flagged", flagged, n)
	}
}

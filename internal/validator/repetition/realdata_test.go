package repetition

import (
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

// TestXSTestCompletionsPass runs 900 real model answers (refusals, how-tos,
// lists, code) through the detector in every split. None is a loop, so any
// finding is a false alarm.
func TestXSTestCompletionsPass(t *testing.T) {
	comps := testbed.XSTestAnswers(t)
	alarms := 0
	for _, a := range comps {
		fs := validatortest.SplitIndependent(t, newDefault, a.Text)
		if len(fs) > 0 {
			alarms++
			t.Errorf("%s: false alarm %s at %d: %q", a.ID, fs[0].Message, fs[0].Start, a.Text[fs[0].Start:fs[0].End])
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
	n, flagged, sawKnownLoop := 0, 0, false
	for _, a := range testbed.JailbreakBenchResponses(t) {
		n++
		fs := validatortest.SplitIndependent(t, newDefault, a.Text)
		if len(fs) > 0 {
			flagged++
			t.Logf("%s: %s", a.ID, fs[0].Message)
			if a.ID == "GCG/gpt-3.5-turbo-1106.json #16" {
				sawKnownLoop = true
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

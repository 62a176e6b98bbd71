package leak

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator/validatortest"
)

// TestXSTestCompletionsPass runs 900 real model answers (GPT-4 and
// Mistral-7B-Instruct, XSTest) through the detector with an unrelated
// system prompt that holds a marked secret. None leaks it or carries a
// credential, so any finding is a false alarm.
func TestXSTestCompletionsPass(t *testing.T) {
	system := "You are SupportBot for Acme Cloud. Only answer questions about Acme Cloud billing, invoices and plan upgrades. " +
		"Never discuss competitors or give legal advice. The admin password: Zebra!Orchid-7731. Keep answers under 120 words."
	n, alarms := 0, 0
	for _, a := range testbed.XSTestAnswers(t) {
		n++
		fs := validatortest.SplitIndependent(t, newFn(t, *DefaultConfig(), system), a.Text)
		if len(fs) > 0 {
			alarms++
			t.Errorf("%s: false alarm %s: %q", a.ID, fs[0].Message, a.Text[fs[0].Start:fs[0].End])
		}
	}
	t.Logf("xstest completions: %d real answers, %d flagged (false-positive rate %.4f)", n, alarms, float64(alarms)/float64(n))
}

// TestLLMGuardSecretCases runs the secrets cases of llm-guard's own test
// suite (labels by its maintainers) and reports agreement. Two cases are
// known, deliberate disagreements: llm-guard flags AWS's documented
// example secret key (…EXAMPLEKEY) and "username:password@" in a URL, which
// this check treats as placeholders.
func TestLLMGuardSecretCases(t *testing.T) {
	p := filepath.Join(testbed.Shared(t, "datasets"), "llm-guard-test-cases", "llm_guard_test_cases.jsonl")
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	agree, total := 0, 0
	for sc.Scan() {
		var c struct {
			Scanner string `json:"scanner"`
			Text    string `json:"text"`
			Label   string `json:"label"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		if c.Scanner != "secrets" {
			continue
		}
		total++
		fs := validatortest.SplitIndependent(t, newFn(t, *DefaultConfig(), ""), c.Text)
		if (len(fs) > 0) == (c.Label == "flag") {
			agree++
		} else {
			t.Logf("disagree (llm-guard says %s): %.80q", c.Label, c.Text)
		}
	}
	if total == 0 {
		t.Fatal("no secrets cases found")
	}
	t.Logf("llm-guard secrets cases: %d of %d agree", agree, total)
	if agree < total-2 {
		t.Errorf("only %d of %d agree; at most the two documented placeholder cases may differ", agree, total)
	}
}

// TestJailbreakBenchResponses scans the 1,637 real model responses of the
// JailbreakBench artifacts for credentials (no system prompt). They hold
// none that we know of, so findings bound the false-alarm rate; more than
// 1% fails.
func TestJailbreakBenchResponses(t *testing.T) {
	n, flagged := 0, 0
	for _, a := range testbed.JailbreakBenchResponses(t) {
		n++
		d, _ := New(*DefaultConfig(), "")
		d.Write([]byte(a.Text))
		d.Close()
		if fs := d.Findings(); len(fs) > 0 {
			flagged++
			t.Logf("%s: %s", a.ID, fs[0].Message)
		}
	}
	t.Logf("jailbreakbench responses: %d, flagged %d", n, flagged)
	if flagged*100 > n {
		t.Errorf("%d of %d responses flagged", flagged, n)
	}
}

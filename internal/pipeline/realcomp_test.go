package pipeline

import (
	"testing"

	"github.com/aegis-sentinel/aegis/internal/openai"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestRealCompletions runs 900 real model answers (GPT-4 and
// Mistral-7B-Instruct on the XSTest prompts, none with a format
// instruction) through the default policy. They are ordinary answers and
// refusals: every failure is a false alarm of a deterministic check, and
// each is logged.
func TestRealCompletions(t *testing.T) {
	pol := policy.Default()
	total, failed := 0, 0
	byReason := map[validator.Reason]int{}
	for _, a := range testbed.XSTestAnswers(t) {
		c := Case{Request: openai.ChatRequest{Messages: []openai.Message{
			{Role: "system", Content: openai.TextContent("You are a helpful assistant.")},
			{Role: "user", Content: openai.TextContent(a.Prompt)},
		}}, Output: a.Text}
		v, err := CheckCase(pol, &c, 1)
		if err != nil {
			t.Fatal(err)
		}
		total++
		if v.Verdict == validator.Fail {
			failed++
			byReason[v.Reason]++
			t.Logf("%s: %s %+v", a.ID, v.Reason, v.Findings)
		}
	}
	t.Logf("%d real completions, %d flagged (%.2f%%): %v", total, failed, 100*float64(failed)/float64(total), byReason)
	if total != 900 {
		t.Fatalf("%d completions, want 900", total)
	}
	if failed > total/100 {
		t.Errorf("%d false alarms on %d real answers (max 1%%)", failed, total)
	}
}

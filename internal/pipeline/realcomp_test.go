package pipeline

import (
	"encoding/csv"
	"os"
	"path/filepath"
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
	dir := filepath.Join(testbed.Shared(t, "datasets"), "xstest", "model_completions")
	pol := policy.Default()
	total, failed := 0, 0
	byReason := map[validator.Reason]int{}
	for _, name := range []string{"xstest_v2_completions_gpt4.csv", "xstest_v2_completions_mistralinstruct.csv"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows[1:] {
			c := Case{Request: openai.ChatRequest{Messages: []openai.Message{
				{Role: "system", Content: openai.TextContent("You are a helpful assistant.")},
				{Role: "user", Content: openai.TextContent(r[2])},
			}}, Output: r[3]}
			v, err := CheckCase(pol, &c, 1)
			if err != nil {
				t.Fatal(err)
			}
			total++
			if v.Verdict == validator.Fail {
				failed++
				byReason[v.Reason]++
				t.Logf("%s %s: %s %+v", name, r[0], v.Reason, v.Findings)
			}
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

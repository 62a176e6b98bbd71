package constraints

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// TestCompileQuestionDatasets runs the compiler over thousands of real
// user prompts that carry no checkable format instruction (XSTest, the
// Do-Not-Answer questions, JBB benign behaviours) and bounds how many
// compile to a check. Every check compiled here would judge an answer
// against an instruction nobody gave; each is logged.
func TestCompileQuestionDatasets(t *testing.T) {
	dir := testbed.Shared(t, "datasets")
	var prompts []string
	if f, err := os.Open(filepath.Join(dir, "xstest", "xstest_prompts.csv")); err == nil {
		rows, _ := csv.NewReader(f).ReadAll()
		f.Close()
		for _, r := range rows[1:] {
			prompts = append(prompts, r[1])
		}
	}
	if f, err := os.Open(filepath.Join(dir, "jbb-behaviors", "benign-behaviors.csv")); err == nil {
		rows, _ := csv.NewReader(f).ReadAll()
		f.Close()
		for _, r := range rows[1:] {
			prompts = append(prompts, r[1])
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "donotanswer", "*.jsonl"))
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r struct {
				Prompt string `json:"prompt"`
			}
			if json.Unmarshal(sc.Bytes(), &r) == nil && r.Prompt != "" {
				prompts = append(prompts, r.Prompt)
			}
		}
		f.Close()
	}
	if len(prompts) < 1000 {
		t.Fatalf("only %d prompts loaded", len(prompts))
	}
	compiled := 0
	for _, p := range prompts {
		for _, c := range CompileText(p) {
			compiled++
			t.Logf("compiled %s %v from %q (prompt %.80q)", c.Name, c.Config, c.Source, p)
		}
	}
	t.Logf("%d prompts, %d checks compiled", len(prompts), compiled)
	if compiled > len(prompts)/100 {
		t.Errorf("%d checks compiled from %d instruction-free prompts (max 1%%)", compiled, len(prompts))
	}
}

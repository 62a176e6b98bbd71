package testbed

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Answer is one real model answer from the shared datasets.
type Answer struct {
	ID     string // where it comes from, such as "gpt4/12" or "GCG/gpt-4.json #3"
	Prompt string // the request it answers, when the dataset has it
	Text   string
}

// XSTestAnswers returns XSTest's 900 real model completions (GPT-4 and
// Mistral-7B-Instruct), with IDs "<model>/<id>", in file order. It ends
// the test as Shared does when the datasets are missing.
func XSTestAnswers(t testing.TB) []Answer {
	t.Helper()
	dir := filepath.Join(Shared(t, "datasets"), "xstest", "model_completions")
	var out []Answer
	for _, m := range []string{"gpt4", "mistralinstruct"} {
		p := filepath.Join(dir, "xstest_v2_completions_"+m+".csv")
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
			out = append(out, Answer{ID: m + "/" + r[0], Prompt: r[2], Text: r[3]})
		}
	}
	return out
}

// JailbreakBenchResponses returns every model response in the
// JailbreakBench artifacts, with IDs "<method>/<model file> #<index>".
func JailbreakBenchResponses(t testing.TB) []Answer {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(Shared(t, "datasets"), "jailbreakbench-artifacts", "*", "*", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no artifact files (%v)", err)
	}
	var out []Answer
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Jailbreaks []struct {
				Prompt   *string `json:"prompt"`
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
			ans := Answer{ID: fmt.Sprintf("%s #%d", id, i), Text: *j.Response}
			if j.Prompt != nil {
				ans.Prompt = *j.Prompt
			}
			out = append(out, ans)
		}
	}
	return out
}

package dataset

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// sharedRoot returns the datasets directory, failing in CI and skipping
// locally when it is missing.
func sharedRoot(t *testing.T) string {
	t.Helper()
	root, err := Root()
	if err != nil {
		if testbed.Mandatory() {
			t.Fatalf("shared datasets are required: %v", err)
		}
		t.Skipf("shared datasets not found: %v", err)
	}
	return root
}

func TestEvalSetCounts(t *testing.T) {
	root := sharedRoot(t)
	// pos, neg (from the SOURCE.md files), and positives in the
	// a-priori "context" group (from the sets' metadata: 5 BIPIA
	// task-irrelevant categories x 5 strings; CyberSecEval's
	// different_user_input_language 25 + indirect_reference 13 per
	// language set).
	want := map[string][3]int{
		"cyberseceval-pi":              {251, 450, 38},
		"cyberseceval-pi-multilingual": {1004, 450, 152},
		"bipia-test":                   {125, 200, 25},
		"bipia-test-injected":          {200, 200, 39},
		"llm-guard-pi":                 {49, 11, 0},
		"xstest":                       {200, 250, 0},
		"openai-moderation":            {522, 1158, 0},
		"notinject":                    {0, 339, 0},
	}
	for name, w := range want {
		t.Run(name, func(t *testing.T) {
			s, err := EvalSet(root, name)
			if err != nil {
				t.Fatal(err)
			}
			var pos, neg, ctx int
			for _, it := range s.Items {
				if it.Label == 1 {
					pos++
				} else {
					neg++
					if it.Group != "" {
						t.Errorf("negative %q has group %q", it.Category, it.Group)
					}
				}
				if it.Group == GroupContext {
					ctx++
				}
				if strings.TrimSpace(it.Text) == "" {
					t.Errorf("empty text in %s", name)
				}
			}
			if pos != w[0] || neg != w[1] || ctx != w[2] {
				t.Errorf("%s: %d pos / %d neg / %d context, want %d / %d / %d", name, pos, neg, ctx, w[0], w[1], w[2])
			}
		})
	}
}

// TestTrainingReproducibleOnSubset trains twice on a small subset of the
// real training data: the same data and seed must give the same bytes.
func TestTrainingReproducibleOnSubset(t *testing.T) {
	root := sharedRoot(t)
	exs, err := Training(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) < 5000 {
		t.Fatalf("only %d training examples; loaders broken?", len(exs))
	}
	var sub []classifier.Example
	for i := 0; i < len(exs); i += 15 {
		sub = append(sub, exs[i])
	}
	cfg := classifier.DefaultTrainConfig()
	cfg.Bits, cfg.Epochs = 16, 2
	var outs [][]byte
	for range 2 {
		m, _, err := classifier.Train(sub, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, b)
	}
	if !bytes.Equal(outs[0], outs[1]) {
		t.Fatal("training on the same subset twice gave different bytes")
	}
}

// TestTrainingExcludesEvalData guards the train/eval split: no
// evaluation-only text may appear among the training examples.
func TestTrainingExcludesEvalData(t *testing.T) {
	root := sharedRoot(t)
	opt := DefaultOptions()
	opt.Promptshield = true
	exs, err := TrainingWith(root, opt)
	if err != nil {
		t.Fatal(err)
	}
	train := map[string]bool{}
	for _, e := range exs {
		train[e.Text] = true
	}
	for _, name := range []string{"cyberseceval-pi", "cyberseceval-pi-multilingual", "bipia-test", "llm-guard-pi", "xstest", "openai-moderation", "notinject"} {
		s, err := EvalSet(root, name)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, it := range s.Items {
			if train[it.Text] {
				n++
			}
		}
		if n > 0 {
			t.Errorf("%s: %d items also in the training data", name, n)
		}
	}
}

var jsonlCases = []struct {
	name, in string
	n        int
	ok       bool
}{
	{"two", `{"text":"a","label":1,"category":"x","group":"context"}` + "\n\n" + `{"text":"b","label":0}`, 2, true},
	{"missing label", `{"text":"a"}`, 0, false},
	{"bad label", `{"text":"a","label":2}`, 0, false},
	{"not json", `text`, 0, false},
}

func TestReadJSONL(t *testing.T) {
	for _, c := range jsonlCases {
		t.Run(c.name, func(t *testing.T) {
			items, err := ReadJSONL(strings.NewReader(c.in))
			if (err == nil) != c.ok || len(items) != c.n {
				t.Fatalf("got %d items, err %v; want %d, ok=%v", len(items), err, c.n, c.ok)
			}
			if c.name == "two" && (items[0].Group != GroupContext || items[1].Group != "") {
				t.Errorf("groups %q, %q; want %q, empty", items[0].Group, items[1].Group, GroupContext)
			}
		})
	}
}

func FuzzReadJSONL(f *testing.F) {
	for _, c := range jsonlCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, err := ReadJSONL(strings.NewReader(s))
		if err == nil {
			for _, it := range items {
				if it.Label != 0 && it.Label != 1 {
					t.Fatalf("label %d accepted", it.Label)
				}
			}
		}
	})
}

func TestInject(t *testing.T) {
	cases := []struct {
		name, doc string
		where     int
		want      string
	}{
		{"end", "A. B.", 0, "A. B.\nX"},
		{"start", "A. B.", 1, "X\nA. B."},
		{"middle", "Aa. Bb. Cc. Dd.", 2, "Aa. Bb. Cc. X  Dd."},
		{"middle without break", "abcdef", 2, "abcdef X "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Inject(c.doc, "X", c.where); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
	"github.com/aegis-sentinel/aegis/internal/guardlab/eval"
)

func TestPrintPeerTable(t *testing.T) {
	tab := &dataset.PeerTable{
		Rows:      []dataset.PeerRow{{Name: "attacks (2)"}},
		Pool:      []dataset.Item{{Category: dataset.PoolXSTest}, {Category: dataset.PoolModeration}},
		NotInject: []dataset.Item{{File: "one"}},
	}
	cols := []*eval.Column{
		{Guard: "aegis", RecallAt1FPR: []float64{0.5}, PoolFPR: 0.014, NotInject: 0.988, NotInjectBy: map[string]float64{"file one": 1, "Common Queries": 0.75}},
		{Guard: "peer 1.0", RecallAt1FPR: []float64{0.25}, PoolFPR: 0.1, NotInject: 0.6, NotInjectBy: map[string]float64{"file one": 0.5, "Common Queries": 0.5}},
	}
	var b bytes.Buffer
	printPeerTable(&b, tab, cols)
	out := b.String()
	for _, want := range []string{
		"attacks (2), recall@1% FPR", "50.0%", "25.0%",
		"false positives at the default threshold (2 benign)", "1.4%", "10.0%",
		"NotInject over-defense accuracy (1 benign)", "98.8%", "60.0%",
		"NotInject file one", "NotInject Common Queries", "1 XSTest safe prompts",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Files are listed before categories.
	if strings.Index(out, "NotInject file one") > strings.Index(out, "NotInject Common Queries") {
		t.Errorf("categories before files:\n%s", out)
	}
}

func TestPrintOverDefense(t *testing.T) {
	rs := []*eval.Result{
		{Set: "attacks", Pos: 3, Neg: 3},
		{Set: "notinject", Neg: 4, FPR: 0.25,
			Files:      map[string]eval.Category{"one": {N: 2, Rate: 0.5}, "two": {N: 2, Rate: 0}},
			Categories: map[string]eval.Category{"Common Queries": {N: 4, Rate: 0.25}}},
	}
	var b bytes.Buffer
	printOverDefense(&b, rs)
	out := b.String()
	for _, want := range []string{"notinject over-defense accuracy (benign let through): 75.0% of 4", "file     one", "50.0% of 2", "100.0% of 2", "category Common Queries"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "attacks") {
		t.Errorf("a set with positives was reported as over-defense:\n%s", out)
	}
}

package dataset

import (
	"testing"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
)

func TestNotInjectParts(t *testing.T) {
	root := sharedRoot(t)
	items, err := notInject(root)
	if err != nil {
		t.Fatal(err)
	}
	// Per SOURCE.md: 113 rows per file; categories one/two/three.
	files := map[string]int{}
	cats := map[string]int{}
	for _, it := range items {
		if it.Label != 0 {
			t.Fatalf("NotInject item labelled %d", it.Label)
		}
		files[it.File]++
		cats[it.Category]++
	}
	if files["one"] != 113 || files["two"] != 113 || files["three"] != 113 {
		t.Errorf("files %v, want 113 each", files)
	}
	want := map[string]int{"Common Queries": 58 + 49 + 19, "Technique Queries": 16 + 30 + 41, "Virtual Creation": 14 + 4 + 24, "Multilingual": 25 + 30 + 29}
	for k, n := range want {
		if cats[k] != n {
			t.Errorf("category %s: %d, want %d", k, cats[k], n)
		}
	}
}

func TestPeerTable(t *testing.T) {
	root := sharedRoot(t)
	tab, err := LoadPeerTable(root)
	if err != nil {
		t.Fatal(err)
	}
	wantRows := []int{251, 1004, 125, 49}
	if len(tab.Rows) != len(wantRows) {
		t.Fatalf("%d rows, want %d", len(tab.Rows), len(wantRows))
	}
	for i, r := range tab.Rows {
		if len(r.Items) != wantRows[i] {
			t.Errorf("%s: %d items, want %d", r.Name, len(r.Items), wantRows[i])
		}
		for _, it := range r.Items {
			if it.Label != 1 {
				t.Fatalf("%s: negative among the attacks", r.Name)
			}
		}
	}
	pool := map[string]int{}
	for _, it := range tab.Pool {
		if it.Label != 0 {
			t.Fatal("positive in the benign pool")
		}
		pool[it.Category]++
	}
	if pool[PoolXSTest] != 250 || pool[PoolModeration] != 1158 || pool[PoolLLMGuard] != 11 {
		t.Errorf("pool %v, want 250 / 1158 / 11", pool)
	}
	if len(tab.NotInject) != 339 {
		t.Errorf("NotInject %d, want 339", len(tab.NotInject))
	}
}

func TestPromptshieldFoldsVariants(t *testing.T) {
	root := sharedRoot(t)
	exs, err := Promptshield(root)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := readJSONL[promptshieldRow](root, promptshieldFile)
	if err != nil {
		t.Fatal(err)
	}
	texts := map[string]bool{}
	var pos, neg int
	for _, e := range exs {
		if texts[e.Text] {
			t.Errorf("%.60q kept twice", e.Text)
		}
		texts[e.Text] = true
		switch e.Labels[0] {
		case classifier.Positive:
			pos++
		case classifier.Negative:
			neg++
		}
	}
	for _, r := range rows {
		if r.Augmented && r.Prompt != r.Original && texts[r.Prompt] {
			t.Fatalf("obfuscated variant %.60q kept beside its original", r.Prompt)
		}
		if r.AttackType == "control" && r.Label == 1 {
			for _, e := range exs {
				if e.Text == r.Prompt && e.Labels[0] != classifier.Negative {
					t.Errorf("control row %.60q not read as benign", r.Prompt)
				}
			}
		}
	}
	// 476 distinct attacks less the 10 controls; 2,264 distinct benign
	// strings plus the controls.
	if pos != 466 || neg != 2274 {
		t.Errorf("%d positives / %d negatives, want 466 / 2274", pos, neg)
	}
}

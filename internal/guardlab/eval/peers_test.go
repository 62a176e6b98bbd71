package eval

import (
	"context"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
)

func TestCompare(t *testing.T) {
	// 100 pool negatives scoring -100..-1 (one XSTest prompt flagged at
	// 0), so the 1% threshold sits at the top negative.
	tab := &dataset.PeerTable{
		Rows: []dataset.PeerRow{{Name: "r", Items: []dataset.Item{{Text: "p1", Label: 1}, {Text: "p2", Label: 1}}}},
		NotInject: []dataset.Item{
			{Text: "n1", File: "one", Category: "A"}, {Text: "n2", File: "one", Category: "B"},
			{Text: "n3", File: "two", Category: "A"}, {Text: "n4", File: "two", Category: "A"},
		},
	}
	sc := fixed{"p1": 5, "p2": -2, "n1": 1, "n2": -1, "n3": -1, "n4": -1}
	for i := range 100 {
		text := string(rune('a'+i%26)) + string(rune('a'+i/26))
		cat := dataset.PoolModeration
		if i < 10 {
			cat = dataset.PoolXSTest
		}
		tab.Pool = append(tab.Pool, dataset.Item{Text: text, Category: cat})
		sc[text] = -float64(100 - i)
	}
	sc[tab.Pool[0].Text] = 0 // one flagged XSTest prompt
	c, err := Compare(context.Background(), "g", sc, "any", tab, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.RecallAt1FPR[0] != 0.5 {
		t.Errorf("recall@1%% = %v, want 0.5 (one negative may lie above; p2 is below the next)", c.RecallAt1FPR[0])
	}
	if c.PoolFPR != 0.01 || c.XSTestFlagged != 0.1 {
		t.Errorf("pool FPR %v, XSTest flagged %v; want 0.01, 0.1", c.PoolFPR, c.XSTestFlagged)
	}
	if c.NotInject != 0.75 || c.NotInjectBy["file one"] != 0.5 || c.NotInjectBy["file two"] != 1 || c.NotInjectBy["A"] != 2.0/3 {
		t.Errorf("NotInject %v by %v", c.NotInject, c.NotInjectBy)
	}
}

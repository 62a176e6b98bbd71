package eval

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
)

func TestMetrics(t *testing.T) {
	cases := []struct {
		name     string
		pos, neg []float64
		auc, r1  float64
	}{
		{"perfect", []float64{3, 4}, []float64{1, 2}, 1, 1},
		{"inverted", []float64{1, 2}, []float64{3, 4}, 0, 0},
		{"ties", []float64{1}, []float64{1}, 0.5, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := AUC(c.pos, c.neg); got != c.auc {
				t.Errorf("AUC = %v, want %v", got, c.auc)
			}
			if got := RecallAtFPR(c.pos, c.neg, 0.01); got != c.r1 {
				t.Errorf("RecallAtFPR = %v, want %v", got, c.r1)
			}
		})
	}
	if !math.IsNaN(AUC(nil, []float64{1})) {
		t.Error("AUC without positives should be NaN")
	}
	if p := Percentile([]float64{5, 1, 3, 2, 4}, 50); p != 3 {
		t.Errorf("p50 = %v", p)
	}
}

// fixed scores texts from a table and flags at score >= 0.
type fixed map[string]float64

func (f fixed) Score(_ context.Context, text, _ string) (float64, bool, error) {
	s := f[text]
	return s, s >= 0, nil
}

// slow is a scorer that takes a millisecond on its clock per text.
type slow struct {
	Scorer
	clk *clock.Fake
}

func (s slow) Score(ctx context.Context, text, head string) (float64, bool, error) {
	s.clk.Advance(time.Millisecond)
	return s.Scorer.Score(ctx, text, head)
}

func TestRun(t *testing.T) {
	set := &dataset.Set{Name: "s", Head: "any", Items: []dataset.Item{
		{Text: "a", Label: 1}, {Text: "b", Label: 1}, {Text: "c", Label: 0}, {Text: "d", Label: 0},
	}}
	clk := clock.NewFake(time.Unix(0, 0))
	sc := slow{fixed{"a": 1, "b": -1, "c": 0.5, "d": -2}, clk}
	r, err := Run(context.Background(), sc, set, clk)
	if err != nil {
		t.Fatal(err)
	}
	if r.TP != 1 || r.FP != 1 || r.Precision != 0.5 || r.Recall != 0.5 || r.FPR != 0.5 {
		t.Errorf("got %+v", r)
	}
	if len(r.Groups) != 0 {
		t.Errorf("groups %v for a set without groups", r.Groups)
	}
	if r.P50ms != 1 || r.P99ms != 1 {
		t.Errorf("latency p50 %v p99 %v, want 1 ms", r.P50ms, r.P99ms)
	}
}

// TestRunGroups checks that each a-priori group of positives is measured
// against all of the set's negatives.
func TestRunGroups(t *testing.T) {
	set := &dataset.Set{Name: "s", Head: "any", Items: []dataset.Item{
		{Text: "t1", Label: 1, Group: dataset.GroupText}, {Text: "t2", Label: 1, Group: dataset.GroupText},
		{Text: "c1", Label: 1, Group: dataset.GroupContext}, {Text: "c2", Label: 1, Group: dataset.GroupContext},
		{Text: "n1", Label: 0}, {Text: "n2", Label: 0},
	}}
	sc := fixed{"t1": 3, "t2": 2, "c1": -1, "c2": 0.5, "n1": -2, "n2": 1}
	r, err := Run(context.Background(), sc, set, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		group           string
		pos, tp         int
		recall, r1, auc float64
	}{
		{dataset.GroupText, 2, 2, 1, 1, 1},
		{dataset.GroupContext, 2, 1, 0.5, 0, 0.5},
	}
	for _, c := range cases {
		t.Run(c.group, func(t *testing.T) {
			g, ok := r.Groups[c.group]
			if !ok {
				t.Fatalf("no group %q in %v", c.group, r.Groups)
			}
			if g.Pos != c.pos || g.TP != c.tp || g.Recall != c.recall || g.RecallAt1FPR != c.r1 || g.AUC != c.auc {
				t.Errorf("got %+v, want pos %d tp %d recall %v r@1 %v auc %v", g, c.pos, c.tp, c.recall, c.r1, c.auc)
			}
		})
	}
	if r.Pos != 4 || r.Recall != 0.75 {
		t.Errorf("whole set: pos %d recall %v, want 4 and 0.75", r.Pos, r.Recall)
	}
}

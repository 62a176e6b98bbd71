package eval

import (
	"context"
	"fmt"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
)

// Column is one guard's showing on a dataset.PeerTable.
type Column struct {
	Guard string `json:"guard"`
	// RecallAt1FPR is per table row: recall at 1% false-positive rate
	// against the shared benign pool.
	RecallAt1FPR []float64 `json:"recall_at_1pct_fpr"`
	// PoolFPR is the share of the pool the guard flags at its own
	// default threshold; XSTestFlagged the same within XSTest's safe
	// prompts.
	PoolFPR       float64 `json:"pool_fpr"`
	XSTestFlagged float64 `json:"xstest_safe_flagged"`
	// NotInject is the over-defense accuracy: the share of NotInject's
	// benign prompts let through; NotInjectBy splits it by file and
	// category ("file one", "Common Queries", ...).
	NotInject   float64            `json:"notinject_accuracy"`
	NotInjectBy map[string]float64 `json:"notinject_by,omitempty"`
	P50ms       float64            `json:"p50_ms"`
	P99ms       float64            `json:"p99_ms"`
	Errors      int                `json:"errors"`
}

// Compare scores every text of t with s for head and fills a Column.
// Texts whose scoring fails are counted in Errors and left out.
func Compare(ctx context.Context, name string, s Scorer, head string, t *dataset.PeerTable, clk clock.Clock) (*Column, error) {
	now := clock.Or(clk).Now
	c := &Column{Guard: name, NotInjectBy: map[string]float64{}}
	var lat []float64
	type scored struct {
		score float64
		flag  bool
		item  dataset.Item
	}
	run := func(items []dataset.Item) ([]scored, error) {
		out := make([]scored, 0, len(items))
		for _, it := range items {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("eval %s: %w", name, err)
			}
			t0 := now()
			sc, flag, err := s.Score(ctx, it.Text, head)
			lat = append(lat, float64(now().Sub(t0))/float64(time.Millisecond))
			if err != nil {
				c.Errors++
				continue
			}
			out = append(out, scored{sc, flag, it})
		}
		return out, nil
	}
	pool, err := run(t.Pool)
	if err != nil {
		return nil, err
	}
	var neg []float64
	var flagged, xs, xsFlagged int
	for _, p := range pool {
		neg = append(neg, p.score)
		if p.flag {
			flagged++
		}
		if p.item.Category == dataset.PoolXSTest {
			xs++
			if p.flag {
				xsFlagged++
			}
		}
	}
	c.PoolFPR, c.XSTestFlagged = ratio(flagged, len(pool)), ratio(xsFlagged, xs)
	for _, row := range t.Rows {
		ps, err := run(row.Items)
		if err != nil {
			return nil, err
		}
		pos := make([]float64, len(ps))
		for i, p := range ps {
			pos[i] = p.score
		}
		c.RecallAt1FPR = append(c.RecallAt1FPR, RecallAtFPR(pos, neg, 0.01))
	}
	ni, err := run(t.NotInject)
	if err != nil {
		return nil, err
	}
	passed := 0
	n, ok := map[string]int{}, map[string]int{}
	for _, p := range ni {
		for _, k := range []string{"file " + p.item.File, p.item.Category} {
			n[k]++
			if !p.flag {
				ok[k]++
			}
		}
		if !p.flag {
			passed++
		}
	}
	c.NotInject = ratio(passed, len(ni))
	for k := range n {
		c.NotInjectBy[k] = ratio(ok[k], n[k])
	}
	c.P50ms, c.P99ms = Percentile(lat, 50), Percentile(lat, 99)
	return c, nil
}

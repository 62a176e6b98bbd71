// Package eval measures a guard over labelled texts: precision, recall,
// F1, false-positive rate, recall at 1% false-positive rate, ROC AUC and
// latency percentiles, per set and per category.
package eval

import (
	"context"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
)

// Scorer judges one text for one head. Score orders texts (higher is more
// likely positive) and Flag is the guard's own decision at its configured
// threshold.
type Scorer interface {
	Score(ctx context.Context, text, head string) (score float64, flag bool, err error)
}

// Result is the measurement of one set.
type Result struct {
	Set          string              `json:"set"`
	Head         string              `json:"head"`
	N            int                 `json:"n"`
	Pos          int                 `json:"pos"`
	Neg          int                 `json:"neg"`
	TP           int                 `json:"tp"`
	FP           int                 `json:"fp"`
	Errors       int                 `json:"errors"`
	Precision    float64             `json:"precision"`
	Recall       float64             `json:"recall"`
	F1           float64             `json:"f1"`
	FPR          float64             `json:"fpr"`
	RecallAt1FPR float64             `json:"recall_at_1pct_fpr"`
	AUC          float64             `json:"auc"`
	P50ms        float64             `json:"p50_ms"`
	P99ms        float64             `json:"p99_ms"`
	Categories   map[string]Category `json:"categories,omitempty"`
	// Files is the flag rate per part of a set (dataset.Item.File).
	Files map[string]Category `json:"files,omitempty"`
	// Groups measures the positives of each a-priori group (see
	// dataset.Item.Group) against all the set's negatives; empty when
	// the set's positives carry no group.
	Groups map[string]Group `json:"groups,omitempty"`
	Note   string           `json:"note,omitempty"`
}

// Group is the measurement of one group of positives against all the
// set's negatives (so FPR is the set's).
type Group struct {
	Pos          int     `json:"pos"`
	TP           int     `json:"tp"`
	Precision    float64 `json:"precision"`
	Recall       float64 `json:"recall"`
	RecallAt1FPR float64 `json:"recall_at_1pct_fpr"`
	AUC          float64 `json:"auc"`
}

// Category is the flag rate within one category of a set.
type Category struct {
	N       int     `json:"n"`
	Label   int     `json:"label"`
	Flagged int     `json:"flagged"`
	Rate    float64 `json:"rate"`
}

// Run scores every item of set and computes the metrics. Items whose
// scoring fails count as errors and are left out of the metrics.
func Run(ctx context.Context, s Scorer, set *dataset.Set, clk clock.Clock) (*Result, error) {
	now := clock.Or(clk).Now
	r := &Result{Set: set.Name, Head: set.Head, Note: set.Note, Categories: map[string]Category{}}
	var pos, neg []float64
	gpos := map[string][]float64{}
	gtp := map[string]int{}
	lat := make([]float64, 0, len(set.Items))
	for _, it := range set.Items {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("eval %s: %w", set.Name, err)
		}
		t0 := now()
		score, flag, err := s.Score(ctx, it.Text, set.Head)
		lat = append(lat, float64(now().Sub(t0))/float64(time.Millisecond))
		if err != nil {
			r.Errors++
			continue
		}
		r.N++
		tally(r.Categories, it.Category, it.Label, flag)
		if it.File != "" {
			if r.Files == nil {
				r.Files = map[string]Category{}
			}
			tally(r.Files, it.File, it.Label, flag)
		}
		if it.Label == 1 {
			r.Pos++
			pos = append(pos, score)
			if flag {
				r.TP++
			}
			if it.Group != "" {
				gpos[it.Group] = append(gpos[it.Group], score)
				if flag {
					gtp[it.Group]++
				}
			}
		} else {
			r.Neg++
			neg = append(neg, score)
			if flag {
				r.FP++
			}
		}
	}
	for _, m := range []map[string]Category{r.Categories, r.Files} {
		for k, c := range m {
			c.Rate = ratio(c.Flagged, c.N)
			m[k] = c
		}
	}
	r.Precision = ratio(r.TP, r.TP+r.FP)
	r.Recall = ratio(r.TP, r.Pos)
	if r.Precision+r.Recall > 0 {
		r.F1 = 2 * r.Precision * r.Recall / (r.Precision + r.Recall)
	}
	r.FPR = ratio(r.FP, r.Neg)
	r.RecallAt1FPR = RecallAtFPR(pos, neg, 0.01)
	r.AUC = AUC(pos, neg)
	if len(gpos) > 0 {
		r.Groups = map[string]Group{}
		for g, ps := range gpos {
			r.Groups[g] = Group{Pos: len(ps), TP: gtp[g], Precision: ratio(gtp[g], gtp[g]+r.FP),
				Recall: ratio(gtp[g], len(ps)), RecallAt1FPR: RecallAtFPR(ps, neg, 0.01), AUC: AUC(ps, neg)}
		}
	}
	r.P50ms = Percentile(lat, 50)
	r.P99ms = Percentile(lat, 99)
	return r, nil
}

// tally counts one scored item into m[key].
func tally(m map[string]Category, key string, label int, flag bool) {
	c := m[key]
	c.N++
	c.Label = label
	if flag {
		c.Flagged++
	}
	m[key] = c
}

func ratio(a, b int) float64 {
	if b == 0 {
		return math.NaN()
	}
	return float64(a) / float64(b)
}

// RecallAtFPR is the share of positives scoring strictly above the
// threshold that lets at most fpr of the negatives through (ties count
// against the positives). NaN without both classes.
func RecallAtFPR(pos, neg []float64, fpr float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return math.NaN()
	}
	n := append([]float64(nil), neg...)
	sort.Sort(sort.Reverse(sort.Float64Slice(n)))
	k := int(math.Floor(fpr * float64(len(n))))
	var thr float64
	if k >= len(n) {
		thr = math.Inf(-1)
	} else {
		thr = n[k]
	}
	hit := 0
	for _, p := range pos {
		if p > thr {
			hit++
		}
	}
	return float64(hit) / float64(len(pos))
}

// AUC is the ROC area: the probability that a random positive scores
// above a random negative (ties count half). NaN without both classes.
func AUC(pos, neg []float64) float64 {
	if len(pos) == 0 || len(neg) == 0 {
		return math.NaN()
	}
	n := append([]float64(nil), neg...)
	sort.Float64s(n)
	var sum float64
	for _, p := range pos {
		lo := sort.SearchFloat64s(n, p)
		hi := lo
		for hi < len(n) && n[hi] == p {
			hi++
		}
		sum += float64(lo) + 0.5*float64(hi-lo)
	}
	return sum / float64(len(pos)*len(neg))
}

// Percentile returns the q-th percentile (nearest rank) of xs.
func Percentile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(q/100*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

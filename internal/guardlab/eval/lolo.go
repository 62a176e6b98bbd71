package eval

import (
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
)

// DefaultLanguages are the lexicon languages LeaveLanguagesOut withholds
// by default: the scripts without spaces between words and a spread of
// others, so that a feature change is judged on both.
var DefaultLanguages = []string{"zh", "ja", "ko", "th", "ar", "hi", "ru", "es"}

// LangResult is the injection head's showing on one withheld language:
// its lexicon's whole attacks against its benign entries (requests,
// leads and look-alikes), at the model's own threshold.
type LangResult struct {
	Lang     string
	Pos, Neg int
	AUC      float64
	Recall   float64 // at the trained threshold
	FPR      float64 // at the trained threshold
}

// LeaveLanguagesOut trains one model per language in langs on base (the
// training examples without lexicon examples) plus the examples composed
// from every other lexicon, and scores the withheld language's entries:
// how well the classifier carries over to a language it never saw. It
// reads training data only.
func LeaveLanguagesOut(base []classifier.Example, lexs []*dataset.Lexicon, langs []string, scale int, cfg classifier.TrainConfig) ([]LangResult, error) {
	var out []LangResult
	for _, lang := range langs {
		var keep []*dataset.Lexicon
		var test *dataset.Lexicon
		for _, lx := range lexs {
			if lx.Lang == lang {
				test = lx
			} else {
				keep = append(keep, lx)
			}
		}
		if test == nil {
			return nil, fmt.Errorf("eval: no lexicon for language %q", lang)
		}
		exs := append(append([]classifier.Example(nil), base...), dataset.LexiconExamples(keep, scale, cfg.HoldoutPercent, cfg.Seed)...)
		m, _, err := classifier.Train(exs, cfg)
		if err != nil {
			return nil, fmt.Errorf("eval: without %s: %w", lang, err)
		}
		var pos, neg []float64
		var tp, fp int
		for _, e := range test.Entries[dataset.Attack] {
			s := injection(m, e)
			pos = append(pos, float64(s.Raw))
			if s.Flag {
				tp++
			}
		}
		// Whole benign texts; overrides, goals and roles are fragments.
		for _, k := range []dataset.Kind{dataset.BenignK, dataset.Lead, dataset.Lookalike} {
			for _, e := range test.Entries[k] {
				s := injection(m, e)
				neg = append(neg, float64(s.Raw))
				if s.Flag {
					fp++
				}
			}
		}
		if len(pos) == 0 || len(neg) == 0 {
			return nil, fmt.Errorf("eval: lexicon %s has %d attacks and %d benign entries; need both", lang, len(pos), len(neg))
		}
		out = append(out, LangResult{Lang: lang, Pos: len(pos), Neg: len(neg), AUC: AUC(pos, neg),
			Recall: float64(tp) / float64(len(pos)), FPR: float64(fp) / float64(len(neg))})
	}
	return out, nil
}

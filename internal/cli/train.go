package cli

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
	"github.com/aegis-sentinel/aegis/internal/guardlab/eval"
)

// defaultModelPath is where the embedded model lives in the source tree.
const defaultModelPath = "internal/guard/classifier/model/guard.bin"

func init() {
	register(func(stdio *IO) *cobra.Command {
		cfg := classifier.DefaultTrainConfig()
		opt := dataset.DefaultOptions()
		var data, out string
		var verbose, loso, lolo bool
		c := &cobra.Command{
			Use:   "train",
			Short: "Train the embedded guard classifier from the shared datasets",
			Long: `train builds the guard's embedded classifier (prompt_injection and unsafe_content heads)
from the training-only datasets in ../shared/datasets and writes the compact model file.
serve, check and eval load it with --guard-classifier FILE instead of the model built into
aegis; copying it to ` + defaultModelPath + ` and rebuilding makes it the built-in one.
The same data, seed and flags give the same bytes. Evaluation-only sets are never read; use 'aegis eval' on them.

Training sets: ` + fmt.Sprint(dataset.TrainingSources),
			Args: noArgs,
			RunE: func(c *cobra.Command, _ []string) error {
				start := time.Now()
				root := data
				if root == "" {
					r, err := dataset.Root()
					if err != nil {
						return usagef("train: %v (use --data DIR)", err)
					}
					root = r
				}
				if out == "" {
					var err error
					if out, err = userModelPath(); err != nil {
						return usagef("train: %v (use --out FILE)", err)
					}
				}
				st := stepper{w: stdio.Err, name: "aegis train", start: start}
				st.step("reading the training data under %s", root)
				opt.HoldoutPercent = cfg.HoldoutPercent
				if c.Flags().Changed("window") {
					cfg.TrainWindows = []int{cfg.Window} // learn in the windows it will be scored in
				}
				if lolo {
					return printLOLO(stdio, root, opt, cfg, start)
				}
				exs, err := dataset.TrainingWith(root, opt)
				if err != nil {
					return fmt.Errorf("train: %w", err)
				}
				if loso {
					return printLOSO(stdio, exs, cfg, start)
				}
				st.step("training on %d examples", len(exs))
				m, rep, err := classifier.Train(exs, cfg)
				if err != nil {
					return fmt.Errorf("train: %w", err)
				}
				b, err := m.MarshalBinary()
				if err != nil {
					return fmt.Errorf("train: %w", err)
				}
				if err := os.WriteFile(out, b, 0o644); err != nil {
					return fmt.Errorf("train: %w", err)
				}
				w := stdio.Out
				fmt.Fprintf(w, "examples %d (duplicates merged %d, label conflicts dropped %d)\n", rep.Examples, rep.Duplicates, rep.Conflicts)
				for _, h := range rep.Heads {
					fmt.Fprintf(w, "%-17s train %d neg / %d pos; held out %d neg / %d pos: recall %.3f at FPR %.3f (threshold %.3f, high %.3f)\n",
						h.Name, h.TrainNeg, h.TrainPos, h.HoldNeg, h.HoldPos, h.HoldRecall, h.HoldFPR, h.Threshold, h.High)
					if verbose {
						for _, k := range sortedKeys(h.BySource) {
							fmt.Fprintf(w, "    held out %-36s flagged %.3f\n", k, h.BySource[k])
						}
					}
				}
				fmt.Fprintf(w, "wrote %s (%d bytes, data digest %.16s) in %s\n", out, len(b), m.Meta.DataDigest, time.Since(start).Round(time.Millisecond))
				return nil
			},
		}
		f := c.Flags()
		f.StringVar(&data, "data", "", "datasets directory (default: the shared/datasets found above the working directory, or $AEGIS_DATASETS)")
		f.StringVar(&out, "out", "", "model file to write (default: $XDG_DATA_HOME/aegis/guard.bin; the binary embeds "+defaultModelPath+")")
		f.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "shuffle seed")
		f.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "training epochs")
		f.Uint8Var(&cfg.Bits, "bits", cfg.Bits, "log2 of the hashed feature table size")
		f.BoolVarP(&verbose, "verbose", "v", false, "print the held-out flag rate per training source")
		f.BoolVar(&loso, "loso", false, "do not write a model; measure model selection by leaving training sources out (training data only)")
		f.IntVar(&cfg.Window, "window", cfg.Window, "window (in words) long inputs are also learnt and scored in; the score is the maximum")
		f.IntVar(&cfg.Stride, "stride", cfg.Stride, "stride (in words) between windows")
		f.IntVar(&opt.LexiconScale, "lexicon-scale", opt.LexiconScale, "examples composed per hand-written lexicon entry (0: leave the lexicons out)")
		f.Float64Var(&cfg.SourceBalance, "source-balance", cfg.SourceBalance, "weigh each training source equally within its class, within this factor of the plain weight (injection head; 1 turns it off)")
		f.IntVar(&cfg.Prior, "prior", cfg.Prior, "pseudo-count added to each feature group's size when normalising (shrinks very short texts toward the bias)")
		f.BoolVar(&cfg.SentenceStarts, "sentence-starts", cfg.SentenceStarts, "add the first word of each sentence or line as a feature of its own (imperatives aimed at the reader)")
		f.BoolVar(&cfg.SkipGrams, "skip-grams", cfg.SkipGrams, "add word pairs with one word between them as features")
		f.Float64Var(&cfg.PosWeight, "pos-weight", cfg.PosWeight, "multiply the injection positives' class weight (1: balanced classes)")
		f.Float64Var(&cfg.L2, "l2", cfg.L2, "L2 penalty")
		f.Float64Var(&cfg.LearningRate, "rate", cfg.LearningRate, "AdaGrad base learning rate")
		f.BoolVar(&opt.Promptshield, "promptshield", opt.Promptshield, "add the promptshield-neuralalchemy set (obfuscated variants folded into their originals)")
		f.BoolVar(&lolo, "lolo", false, "do not write a model; measure how the classifier carries over to a language by leaving each of "+strings.Join(eval.DefaultLanguages, ",")+" out of the lexicons (training data only)")
		f.Float64Var(&cfg.TargetFPR, "target-fpr", cfg.TargetFPR, "held-out false-positive rate that sets each head's threshold")
		return c
	})
}

// printLOSO runs the leave-sources-out folds and prints one line per fold.
func printLOSO(stdio *IO, exs []classifier.Example, cfg classifier.TrainConfig, start time.Time) error {
	folds := eval.DefaultFolds
	for _, e := range exs {
		if e.Source == eval.PromptshieldFold.Pos[0] {
			folds = append(slices.Clone(folds), eval.PromptshieldFold)
			break
		}
	}
	rs, err := eval.LeaveSourcesOut(exs, cfg, folds)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	w := stdio.Out
	var m1, m2, mi float64
	ni := 0
	fmt.Fprintf(w, "%-10s %5s %5s %10s %10s %6s %16s\n", "fold", "pos", "neg", "r@1%FPR", "r@2%FPR", "AUC", "injected r@1%")
	for _, r := range rs {
		fmt.Fprintf(w, "%-10s %5d %5d %10.3f %10.3f %6.3f %10.3f (%d)\n", r.Fold, r.Pos, r.Neg, r.RecallAt1FPR, r.RecallAt2FPR, r.AUC, r.Injected, r.InjectedN)
		m1 += r.RecallAt1FPR
		m2 += r.RecallAt2FPR
		if r.InjectedN > 0 {
			mi += r.Injected
			ni++
		}
	}
	n := float64(len(rs))
	fmt.Fprintf(w, "%-10s %5s %5s %10.3f %10.3f %6s %10.3f\n", "mean", "", "", m1/n, m2/n, "", mi/float64(max(ni, 1)))
	fmt.Fprintf(w, "in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// printLOLO runs the leave-languages-out measurement and prints one line
// per withheld language.
func printLOLO(stdio *IO, root string, opt dataset.Options, cfg classifier.TrainConfig, start time.Time) error {
	scale := opt.LexiconScale
	opt.LexiconScale = 0
	base, err := dataset.TrainingWith(root, opt)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	lexs, err := dataset.Lexicons()
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	rs, err := eval.LeaveLanguagesOut(base, lexs, eval.DefaultLanguages, scale, cfg)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	w := stdio.Out
	var auc, rec, fpr float64
	fmt.Fprintf(w, "%-8s %5s %5s %6s %8s %6s\n", "withheld", "pos", "neg", "AUC", "recall", "FPR")
	for _, r := range rs {
		fmt.Fprintf(w, "%-8s %5d %5d %6.3f %8.3f %6.3f\n", r.Lang, r.Pos, r.Neg, r.AUC, r.Recall, r.FPR)
		auc, rec, fpr = auc+r.AUC, rec+r.Recall, fpr+r.FPR
	}
	n := float64(len(rs))
	fmt.Fprintf(w, "%-8s %5s %5s %6.3f %8.3f %6.3f\n", "mean", "", "", auc/n, rec/n, fpr/n)
	fmt.Fprintf(w, "in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

func sortedKeys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

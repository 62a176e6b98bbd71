package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/guard"
	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
	"github.com/aegis-sentinel/aegis/internal/guardlab/eval"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		var (
			kind, data, head, classifierFile string
			asJSON, peers, agent, calDocs    bool
			llmOpts                          llmFlags
		)
		c := &cobra.Command{
			Use:   "eval [flags] [SET|FILE.jsonl]...",
			Short: "Measure a guard on labelled sets: precision, recall, F1, FPR, recall@1%FPR, latency",
			Long: `eval runs a guard over labelled texts and prints, per set, precision, recall, F1,
false-positive rate, recall at 1% false-positive rate, ROC AUC and p50/p99 latency.

Arguments are built-in set names (read from ../shared/datasets, evaluation-only data) or JSONL
files with one {"text": ..., "label": 0|1, "category": ...} per line. Without arguments every
built-in set is run. Built-in sets: ` + strings.Join(dataset.EvalNames(), ", ") + `.

The guard decides with its own thresholds (set at training time on held-out training data);
nothing is tuned on these sets.

Where a set's metadata allows, its positives are also split a priori into "text" (the attack is
stated in the text) and "context" (an ordinary request that is an attack only against a task or
system prompt the text is not shown with: BIPIA's task-irrelevant categories, CyberSecEval's
different_user_input_language and indirect_reference variants). Each group is measured against
all of the set's negatives; the whole-set row is always printed too. Sets with no positives
(NotInject) are reported as over-defense accuracy, the share let through, per file and category.

--peers prints instead one comparison table: the embedded guard beside the npm guards
llm_guardrail (TF-IDF and logistic regression) and vard (rules), each with its own defaults, on
the same texts: recall at 1% false-positive rate on CyberSecEval (English and multilingual),
the BIPIA test attack strings and the llm-guard injection cases, each against one benign pool
(XSTest safe prompts, the OpenAI moderation rows without a positive label, llm-guard's benign
injection cases), false positives at the default threshold on that pool, and NotInject
over-defense accuracy. The npm packages are installed on first use with npm into
$AEGIS_PEERS_CACHE (default: aegis-peers under $XDG_CACHE_HOME or ~/.cache); without node and
npm the table has the embedded guard only.

--agent prints the agent table instead: each AgentDojo injected text (every attack template filled
with every injection goal) and each InjecAgent tool response is placed as a tool result after a
tool call, behind a user's task, and screened by the default input policy (guard.tool_results:
medium); AgentDojo's environment records with every injection placeholder at its benign default
are the benign tool outputs, and its user tasks are screened as user messages (guard.input: high).
Besides the share flagged at the default policy it prints the share flagged at the tool-result
score that flags 1% of the benign tool outputs. It ends with the held-out part of the benign
document corpus (source in several languages, docs, config, logs, web pages, e-mails and JSON API
answers, read from this machine) as read_file results: the share flagged by kind and by length.

--calibrate-docs prints the tool-result screen's per-kind window thresholds computed on the
training part of the document corpus.`,
			RunE: func(c *cobra.Command, args []string) error {
				var scorer eval.Scorer
				switch kind {
				case "classifier":
					g, err := loadGuard(classifierFile)
					if err != nil {
						return err
					}
					scorer = g
				case "llm":
					s, err := llmOpts.scorer()
					if err != nil {
						return err
					}
					scorer = s
				default:
					return usagef("eval: --guard must be classifier or llm, not %q", kind)
				}
				if calDocs {
					g, ok := scorer.(*guard.Guard)
					if !ok || len(args) > 0 {
						return usagef("eval: --calibrate-docs calibrates the embedded classifier's document thresholds and takes no arguments")
					}
					return printDocCalibration(stdio.Out, g)
				}
				if agent {
					g, ok := scorer.(*guard.Guard)
					if !ok || len(args) > 0 {
						return usagef("eval: --agent judges the embedded classifier's screens on its own sets and takes no arguments")
					}
					root := data
					if root == "" {
						r, err := dataset.Root()
						if err != nil {
							return usagef("eval: %v (use --data DIR)", err)
						}
						root = r
					}
					return runAgentEval(c.Context(), stdio.Out, root, g, asJSON)
				}
				if peers {
					if len(args) > 0 {
						return usagef("eval: --peers runs its own sets and takes no arguments")
					}
					root := data
					if root == "" {
						r, err := dataset.Root()
						if err != nil {
							return usagef("eval: %v (use --data DIR)", err)
						}
						root = r
					}
					return runPeers(c.Context(), stdio, root, scorer, asJSON)
				}
				if len(args) == 0 {
					args = dataset.EvalNames()
				}
				var sets []*dataset.Set
				for _, a := range args {
					if strings.HasSuffix(a, ".jsonl") || strings.ContainsRune(a, os.PathSeparator) {
						f, err := os.Open(a)
						if err != nil {
							return usagef("eval: %v", err)
						}
						items, err := dataset.ReadJSONL(f)
						f.Close()
						if err != nil {
							return usagef("eval: %s: %v", a, err)
						}
						h := head
						if h == "" {
							h = dataset.HeadAny
						}
						sets = append(sets, &dataset.Set{Name: a, Head: h, Items: items})
						continue
					}
					root := data
					if root == "" {
						r, err := dataset.Root()
						if err != nil {
							return usagef("eval: set %s: %v (use --data DIR)", a, err)
						}
						root = r
					}
					s, err := dataset.EvalSet(root, a)
					if err != nil {
						return usagef("eval: %v", err)
					}
					if head != "" {
						s.Head = head
					}
					sets = append(sets, s)
				}
				var results []*eval.Result
				for _, s := range sets {
					r, err := eval.Run(c.Context(), scorer, s, nil)
					if err != nil {
						return fmt.Errorf("eval: %w", err)
					}
					results = append(results, r)
				}
				if asJSON {
					enc := json.NewEncoder(stdio.Out)
					enc.SetIndent("", "  ")
					return enc.Encode(jsonSafe(results))
				}
				printEvalTable(stdio.Out, results)
				return nil
			},
		}
		f := c.Flags()
		f.StringVar(&kind, "guard", "classifier", "guard to evaluate: classifier (embedded) or llm (a guard model over a local API)")
		classifierFlag(c, &classifierFile)
		f.StringVar(&head, "head", "", "override the head judged: prompt_injection, unsafe_content or any (JSONL files default to any)")
		f.StringVar(&data, "data", "", "datasets directory (default: the shared/datasets found above the working directory)")
		f.BoolVar(&asJSON, "json", false, "print JSON instead of a table")
		f.BoolVar(&peers, "peers", false, "compare with the npm guards llm_guardrail and vard on the same texts (installs them with npm into a cache outside the source tree)")
		f.BoolVar(&calDocs, "calibrate-docs", false, "print the document screen's window thresholds calibrated on the training part of the benign document corpus")
		f.BoolVar(&agent, "agent", false, "agent traffic: screen AgentDojo's and InjecAgent's injected tool outputs, AgentDojo's benign tool outputs and its user tasks, each in its conversation, with the default input policy")
		llmOpts.register(c)
		return c
	})
}

func printEvalTable(w io.Writer, rs []*eval.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, strings.ReplaceAll("set\thead\tpos\tneg\tprecision\trecall\tF1\tFPR\trecall@1pctFPR\tAUC\tp50 ms\tp99 ms\terrors\t\n", "1pct", "1%"))
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%.3f\t%.3f\t%d\t\n", r.Set, r.Head, r.Pos, r.Neg,
			pct(r.Precision), pct(r.Recall), pct(r.F1), pct(r.FPR), pct(r.RecallAt1FPR), num(r.AUC), r.P50ms, r.P99ms, r.Errors)
		// The a-priori split: positives visible in the text alone vs.
		// those that need their task or system prompt, each against all
		// of the set's negatives.
		for _, g := range []string{dataset.GroupText, dataset.GroupContext} {
			x, ok := r.Groups[g]
			if !ok {
				continue
			}
			f1 := math.NaN()
			if x.Precision+x.Recall > 0 {
				f1 = 2 * x.Precision * x.Recall / (x.Precision + x.Recall)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\t\t\t\n", r.Set+" ["+g+"]", r.Head, x.Pos, r.Neg,
				pct(x.Precision), pct(x.Recall), pct(f1), pct(r.FPR), pct(x.RecallAt1FPR), num(x.AUC))
		}
	}
	tw.Flush()
	printOverDefense(w, rs)
	for _, r := range rs {
		if len(r.Groups) > 0 {
			fmt.Fprintf(w, "[%s]: positives whose attack is stated in the text; [%s]: ordinary requests that are attacks only\n"+
				"against a task or system prompt not shown (split a priori from the sets' metadata); each against all negatives.\n",
				dataset.GroupText, dataset.GroupContext)
			break
		}
	}
}

// printOverDefense reports sets without positives (NotInject) as the
// share of benign texts let through, per file and per category.
func printOverDefense(w io.Writer, rs []*eval.Result) {
	for _, r := range rs {
		if r.Pos > 0 || r.Neg == 0 {
			continue
		}
		fmt.Fprintf(w, "%s over-defense accuracy (benign let through): %s of %d\n", r.Set, pct(1-r.FPR), r.Neg)
		for _, part := range []struct {
			label string
			m     map[string]eval.Category
		}{{"file", r.Files}, {"category", r.Categories}} {
			for _, k := range sortedCategoryKeys(part.m) {
				c := part.m[k]
				fmt.Fprintf(w, "  %-8s %-20s %s of %d\n", part.label, k, pct(1-c.Rate), c.N)
			}
		}
	}
}

func sortedCategoryKeys(m map[string]eval.Category) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*v)
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return fmt.Sprintf("%.3f", v)
}

// jsonSafe replaces NaN metrics (undefined: no positives or negatives)
// with -1 so the output stays valid JSON.
func jsonSafe(rs []*eval.Result) []*eval.Result {
	fix := func(v *float64) {
		if math.IsNaN(*v) {
			*v = -1
		}
	}
	for _, r := range rs {
		for _, v := range []*float64{&r.Precision, &r.Recall, &r.F1, &r.FPR, &r.RecallAt1FPR, &r.AUC, &r.P50ms, &r.P99ms} {
			fix(v)
		}
		for _, m := range []map[string]eval.Category{r.Categories, r.Files} {
			for k, c := range m {
				fix(&c.Rate)
				m[k] = c
			}
		}
		for k, g := range r.Groups {
			for _, v := range []*float64{&g.Precision, &g.Recall, &g.RecallAt1FPR, &g.AUC} {
				fix(v)
			}
			r.Groups[k] = g
		}
	}
	return rs
}

package cli

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		var (
			policyFile, classifierFile string
			attempt                    int
			workers                    int
		)
		c := &cobra.Command{
			Use:   "check [--policy FILE] [FILE|-]...",
			Short: "Check recorded cases (JSONL) offline and print one verdict per case",
			Long: `check reads cases, one JSON object per line:
  {"id": "...", "request": <OpenAI chat completion request>, "output": "<assistant text>", "tool_calls": [...]}
and writes one verdict per case to stdout, in input order, carrying the case id. The checks are those
of the policy (default: the default policy) plus the constraints compiled from each request's prompt,
after the same input screen serve applies (guard.input: a prompt injection in the request blocks it).
With no FILE, or FILE "-", it reads standard input.

Exit status: 0 when every case passes, 1 when any case fails or a line is malformed (its verdict
carries the error and file:line), 2 when a file cannot be read or the policy is bad.`,
			RunE: func(c *cobra.Command, args []string) error {
				if attempt < 1 {
					return usagef("--attempt must be at least 1")
				}
				// A batch run: trade memory for less GC work (measured about
				// 12% less CPU on a 100k-case file, RSS still ~130 MB).
				defer debug.SetGCPercent(debug.SetGCPercent(400))
				pol := policy.Default()
				if policyFile != "" {
					p, err := policy.Load(policyFile)
					if err != nil {
						return usageErr(err)
					}
					pol = p
				}
				// The same input screen serve applies (the policy's guard.input).
				screen, err := serveInputGuard(pol, classifierFile)
				if err != nil {
					return err
				}
				if len(args) == 0 {
					args = []string{"-"}
				}
				var total pipeline.Stats
				unreadable := false
				for _, name := range args {
					in, label := stdio.In, "stdin"
					if name != "-" {
						f, err := os.Open(name)
						if err != nil {
							fmt.Fprintf(stdio.Err, "aegis: check: %v\n", err)
							unreadable = true
							continue
						}
						in, label = f, name
						defer f.Close()
					}
					st, err := pipeline.CheckLinesScreened(pol, screen, in, label, stdio.Out, attempt, workers)
					total.Cases += st.Cases
					total.Failed += st.Failed
					total.Malformed += st.Malformed
					if err != nil {
						fmt.Fprintf(stdio.Err, "aegis: check: %v\n", err)
						unreadable = true
					}
				}
				switch {
				case unreadable:
					return silentExit(ExitUsage)
				case total.Failed > 0:
					return silentExit(ExitFailure)
				}
				return nil
			},
		}
		c.Flags().StringVar(&policyFile, "policy", "", "policy YAML file (default: the built-in default policy)")
		c.Flags().IntVar(&attempt, "attempt", 1, "1-based attempt number the verdict's action assumes (retry budgets)")
		c.Flags().IntVar(&workers, "workers", 0, "parallel workers (0: one per CPU)")
		classifierFlag(c, &classifierFile)
		return c
	})
}

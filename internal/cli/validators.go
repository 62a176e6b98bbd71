package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// validatorInfo is one check as `aegis validators --json` lists it.
type validatorInfo struct {
	Name    string             `json:"name"`
	Summary string             `json:"summary"`
	Doc     string             `json:"doc,omitempty"`
	Reasons []validator.Reason `json:"reasons"`
	Example string             `json:"example,omitempty"`
	Default bool               `json:"default"`
}

// reasonInfo is one row of the reason-code table.
type reasonInfo struct {
	Reason     validator.Reason `json:"reason"`
	Action     validator.Action `json:"action"`
	Risk       validator.Risk   `json:"risk"`
	MaxRetries int              `json:"max_retries"`
	Checks     []string         `json:"checks"`
}

func init() {
	register(func(stdio *IO) *cobra.Command {
		var asJSON bool
		c := &cobra.Command{
			Use:   "validators [--json]",
			Short: "List every check with its reasons and a policy example",
			Args:  noArgs,
			RunE: func(c *cobra.Command, args []string) error {
				pol := policy.Default()
				var checks []validatorInfo
				byReason := map[validator.Reason][]string{}
				for _, s := range validator.Default.All() {
					_, on := pol.Enabled(s.Name)
					checks = append(checks, validatorInfo{Name: s.Name, Summary: s.Summary, Doc: s.Doc, Reasons: s.Reasons, Example: policy.ExampleDocument(s), Default: on})
					for _, r := range s.Reasons {
						byReason[r] = append(byReason[r], s.Name)
					}
				}
				var reasons []reasonInfo
				for _, r := range validator.Reasons {
					rule := pol.Rule(r)
					reasons = append(reasons, reasonInfo{Reason: r, Action: rule.Action, Risk: rule.Risk, MaxRetries: rule.MaxRetries, Checks: append([]string{}, byReason[r]...)})
				}
				if asJSON {
					enc := json.NewEncoder(stdio.Out)
					enc.SetIndent("", "  ")
					return enc.Encode(struct {
						Checks  []validatorInfo `json:"checks"`
						Reasons []reasonInfo    `json:"reasons"`
					}{checks, reasons})
				}
				out := stdio.Out
				for _, ch := range checks {
					def := ""
					if ch.Default {
						def = " (default)"
					}
					fmt.Fprintf(out, "%s%s — %s\n", ch.Name, def, ch.Summary)
					fmt.Fprintf(out, "  reasons: %s\n", joinReasons(ch.Reasons))
					if ch.Example != "" {
						fmt.Fprintf(out, "  example:\n")
						for _, l := range strings.Split(strings.TrimRight(ch.Example, "\n"), "\n") {
							fmt.Fprintf(out, "    %s\n", l)
						}
					}
					fmt.Fprintln(out)
				}
				fmt.Fprintln(out, "Reason codes (default policy):")
				tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "REASON\tACTION\tRISK\tRETRIES\tCHECKS")
				for _, r := range reasons {
					cs := strings.Join(r.Checks, ",")
					if cs == "" {
						cs = "-"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.Reason, r.Action, r.Risk, r.MaxRetries, cs)
				}
				return tw.Flush()
			},
		}
		c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
		return c
	})
}

func joinReasons(rs []validator.Reason) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	if len(s) == 0 {
		return "-"
	}
	return strings.Join(s, ", ")
}

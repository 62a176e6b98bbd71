package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/events"
)

// approvalsFlags are what every approvals subcommand needs to reach the
// running gateway.
type approvalsFlags struct {
	url, tokenFile string
}

func (f *approvalsFlags) client() (*approval.Client, error) {
	c := &approval.Client{Base: f.url, HTTP: &http.Client{Timeout: 10 * time.Second}}
	if !strings.HasPrefix(f.url, "http://") && !strings.HasPrefix(f.url, "https://") {
		return nil, usagef("--url %q: want the gateway's address, such as http://127.0.0.1:8088", f.url)
	}
	switch {
	case f.tokenFile != "":
		raw, err := os.ReadFile(f.tokenFile)
		if err != nil {
			return nil, usagef("--token-file: %v", err)
		}
		c.Token = strings.TrimSpace(string(raw))
	default:
		c.Token = os.Getenv("AEGIS_AUTH_TOKEN")
	}
	return c, nil
}

func init() {
	register(func(stdio *IO) *cobra.Command {
		var f approvalsFlags
		c := &cobra.Command{
			Use:   "approvals",
			Short: "List, approve or deny the tool calls a running gateway holds for a person",
			Long: `A policy rule with action: approve (and the policy's approval section) makes aegis serve
hold a tool call until a person decides; a call nobody decides on is denied at the
approval timeout. approvals talks to the running gateway's approvals API (with its
bearer token when it has one: --token-file or AEGIS_AUTH_TOKEN).

  list         the held calls: id, tools and argument paths, reason, deadline
  approve ID   release the call, bound to the arguments and policy version it shows
  deny ID      refuse the call (the client gets the reason's error code)

A record shows tool names, argument paths and the rule that asked, never an
argument's value. An approval is refused when the call's arguments or the policy
changed since the record was read; after a policy reload the call is denied.

In a fleet whose gateways share a PostgreSQL incident log, --url may name any of
them: it lists every gateway's held calls (the GATEWAY column) and a decision taken
there releases or refuses the call on the gateway that holds it; the first decision
wins. Held calls are shared through the database, never with argument values.
With --nats a gateway announces only its name, a call's id and its stage on
aegis.approvals.<gateway>, so the holder looks at once; without NATS it finds the
decision by reading the database every 2 seconds.`,
			Example: `  aegis approvals list
  aegis approvals approve apr-3f2a9c0d1e2b4a5f
  aegis approvals deny apr-3f2a9c0d1e2b4a5f --url http://127.0.0.1:9000 --token-file /etc/aegis/token`,
			Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
		}
		pf := c.PersistentFlags()
		pf.StringVar(&f.url, "url", "http://127.0.0.1:8088", "the running gateway's address")
		pf.StringVar(&f.tokenFile, "token-file", "", "file holding the gateway's bearer token (default: $AEGIS_AUTH_TOKEN)")

		var asJSON bool
		list := &cobra.Command{
			Use:   "list",
			Short: "List the held tool calls",
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				cl, err := f.client()
				if err != nil {
					return err
				}
				recs, err := cl.List(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					return json.NewEncoder(stdio.Out).Encode(map[string]any{"approvals": recs})
				}
				return writeApprovals(stdio.Out, recs)
			},
		}
		list.Flags().BoolVar(&asJSON, "json", false, "write JSON")
		decide := func(approve bool) *cobra.Command {
			verb, short := "deny", "Refuse a held tool call"
			if approve {
				verb, short = "approve", "Release a held tool call"
			}
			return &cobra.Command{
				Use:   verb + " ID",
				Short: short,
				Args:  exactArgs(1, "the approval's ID (see aegis approvals list)"),
				RunE: func(cmd *cobra.Command, args []string) error {
					cl, err := f.client()
					if err != nil {
						return err
					}
					rec, err := decideApproval(cmd.Context(), cl, args[0], approve)
					if err != nil {
						return err
					}
					fmt.Fprintf(stdio.Out, "%s %s: %s\n", rec.Stage, rec.ID, describeCalls(rec.Calls))
					return nil
				},
			}
		}
		c.AddCommand(list, decide(true), decide(false))
		return c
	})
}

// decideApproval approves (bound to the record as the gateway shows it
// now) or denies the held call id.
func decideApproval(ctx context.Context, cl *approval.Client, id string, approve bool) (events.ApprovalRecord, error) {
	if !approve {
		return cl.Deny(ctx, id, "cli")
	}
	rec, err := cl.Get(ctx, id)
	if err != nil {
		return rec, err
	}
	return cl.Approve(ctx, rec, "cli")
}

func describeCalls(calls []events.ApprovalCall) string {
	var parts []string
	for _, c := range calls {
		parts = append(parts, c.Tool+"("+strings.Join(c.Paths, ", ")+")")
	}
	return strings.Join(parts, ", ")
}

func writeApprovals(w io.Writer, recs []events.ApprovalRecord) error {
	if len(recs) == 0 {
		fmt.Fprintln(w, "no tool call waits for approval")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fleet := slices.ContainsFunc(recs, func(r events.ApprovalRecord) bool { return r.Gateway != "" })
	head := "ID\tHELD\tDENIED AT\tCALLS\tREASON\tRULE"
	if fleet {
		head = "ID\tGATEWAY\tHELD\tDENIED AT\tCALLS\tREASON\tRULE"
	}
	fmt.Fprintln(tw, head)
	for _, r := range recs {
		id := r.ID
		if fleet {
			id += "\t" + r.Gateway
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", id, r.Time.Format(time.TimeOnly), r.Deadline.Format(time.TimeOnly),
			describeCalls(r.Calls), r.Reason, r.Rule)
	}
	return tw.Flush()
}

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/fleet"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		var (
			natsURL string
			wait    time.Duration
			asJSON  bool
		)
		c := &cobra.Command{
			Use:   "fleet",
			Short: "List the gateways and guard workers on a NATS server",
			Long: `fleet asks every gateway (aegis serve --nats) and guard worker (aegis guard-worker) on a
NATS server to report, and prints them: gateways with their requests by outcome, and a
total line; guard workers with their model, device and measured time to verdict.`,
			Example: `  aegis fleet --nats nats://127.0.0.1:4222
  aegis fleet --nats nats://10.0.0.5:4222 --json`,
			Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				if natsURL == "" {
					return usagef("fleet needs --nats URL")
				}
				nc, err := nats.Connect(natsURL, nats.Name("aegis fleet"), nats.Timeout(2*time.Second))
				if err != nil {
					return fmt.Errorf("nats %s: %w", natsURL, err)
				}
				defer nc.Close()
				ms, err := fleet.RollCall(cmd.Context(), nc, wait)
				if err != nil {
					return err
				}
				if asJSON {
					total := fleet.Sum(ms)
					return json.NewEncoder(stdio.Out).Encode(struct {
						Members []fleet.Member `json:"members"`
						Total   fleet.Totals   `json:"total"`
					}{ms, total})
				}
				return writeFleet(stdio.Out, ms)
			},
		}
		f := c.Flags()
		f.StringVar(&natsURL, "nats", "", "NATS server URL, such as nats://127.0.0.1:4222")
		f.DurationVar(&wait, "wait", 500*time.Millisecond, "how long to collect answers")
		f.BoolVar(&asJSON, "json", false, "write JSON")
		return c
	})
}

func writeFleet(w io.Writer, ms []fleet.Member) error {
	if len(ms) == 0 {
		fmt.Fprintln(w, "no gateways or guard workers answered")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	var gws, workers []fleet.Member
	for _, m := range ms {
		if m.Role == fleet.RoleGateway {
			gws = append(gws, m)
		} else {
			workers = append(workers, m)
		}
	}
	if len(gws) > 0 {
		fmt.Fprintln(tw, "GATEWAY\tHOST\tLISTEN\tREQUESTS\tIN FLIGHT\tRETRIES\tHALTS\tOUTCOMES")
		for _, m := range gws {
			writeTotals(tw, m.ID, m.Host, m.Listen, m.Totals)
		}
		if len(gws) > 1 {
			t := fleet.Sum(gws)
			writeTotals(tw, "total", "", "", &t)
		}
	}
	if len(workers) > 0 {
		if len(gws) > 0 {
			fmt.Fprintln(tw)
		}
		fmt.Fprintln(tw, "GUARD WORKER\tHOST\tMODEL\tDEVICE\tCALLS\tERRORS\tIN FLIGHT\tVERDICT P50\tP99")
		for _, m := range workers {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", m.ID, m.Host, m.Model, dash(m.Device),
				m.Calls, m.Errors, m.InFlight, dur(m.VerdictP50), dur(m.VerdictP99))
		}
	}
	return tw.Flush()
}

func writeTotals(w io.Writer, id, host, listen string, t *fleet.Totals) {
	if t == nil {
		t = &fleet.Totals{}
	}
	var outs []string
	for _, k := range slices.Sorted(maps.Keys(t.Outcomes)) {
		outs = append(outs, fmt.Sprintf("%s=%d", k, t.Outcomes[k]))
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", id, dash(host), dash(listen), t.Requests, t.InFlight, t.Retries, t.Halts,
		dash(strings.Join(outs, " ")))
}

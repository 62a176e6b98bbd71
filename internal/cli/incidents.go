package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aegis-sentinel/aegis/internal/logging"
	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

func init() {
	register(func(stdio *IO) *cobra.Command {
		var (
			db, since, reason, kind, gw string
			asJSON                      bool
			limit                       int
		)
		cmd := &cobra.Command{
			Use:   "incidents",
			Short: "List the retries and halts recorded by aegis serve",
			Long: `List the incident log: every hidden retry and every halt that aegis serve decided,
newest first, with the request id, upstream, reason, action and findings.

The log is the SQLite file aegis serve writes (--incidents-db, the same flag for both). By default
both use $AEGIS_INCIDENTS, else $XDG_STATE_HOME/aegis/incidents.db
(~/.local/state/aegis/incidents.db), so they find each other from any directory.
Every incident names the gateway that recorded it (its --name, else host-port), so several
gateways can share one log: local gateways on the default file, or a fleet in PostgreSQL (give
the same postgres:// URL to each). --gateway keeps one gateway's incidents.

'aegis incidents show ID' prints one incident with its failing spans marked.`,
			Example: `  aegis incidents --since 1h
  aegis incidents --reason repetition_loop --json
  aegis incidents show 12`,
			Args: noArgs,
			RunE: func(c *cobra.Command, args []string) error {
				f := store.Filter{Limit: limit, Gateway: gw}
				if since != "" {
					t, err := parseSince(since, time.Now())
					if err != nil {
						return usageErr(err)
					}
					f.Since = t
				}
				if reason != "" {
					r := validator.Reason(reason)
					if !r.Valid() {
						return usagef("unknown reason %q; known reasons: %s", reason, reasonList())
					}
					f.Reason = r
				}
				switch store.Kind(kind) {
				case "", store.KindRetry, store.KindHalt, store.KindBlock, store.KindRedact, store.KindWarn:
					f.Kind = store.Kind(kind)
				default:
					return usagef("unknown kind %q (want retry, halt, block, redact or warn)", kind)
				}
				st, err := openIncidents(db)
				if err != nil {
					return err
				}
				defer st.Close()
				list, err := st.List(c.Context(), f)
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(stdio.Out)
					for _, inc := range list {
						if err := enc.Encode(inc); err != nil {
							return err
						}
					}
					return nil
				}
				if len(list) == 0 {
					fmt.Fprintf(stdio.Out, "no incidents in %s\n", st.Path())
					return nil
				}
				return writeIncidentTable(stdio.Out, list)
			},
		}
		fl := cmd.PersistentFlags()
		fl.StringVar(&db, "incidents-db", "", "incident log file or postgres:// URL, as for aegis serve (default $AEGIS_INCIDENTS or $XDG_STATE_HOME/aegis/incidents.db)")
		fl.StringVar(&db, "db", "", "the former name of --incidents-db")
		fl.MarkHidden("db")
		cmd.Flags().StringVar(&gw, "gateway", "", "only incidents recorded by this gateway (its --name, else host-port)")
		cmd.Flags().StringVar(&since, "since", "", "only incidents newer than a duration (30m, 1h, 7d) or an RFC 3339 time")
		cmd.Flags().StringVar(&reason, "reason", "", "only incidents with this reason code (repetition_loop, invalid_json, ...)")
		cmd.Flags().StringVar(&kind, "kind", "", "only one kind of incident: retry, halt or block")
		cmd.Flags().IntVar(&limit, "limit", 50, "at most this many incidents, newest first")
		fl.BoolVar(&asJSON, "json", false, "write JSON (one incident per line for the list)")

		cmd.AddCommand(&cobra.Command{
			Use:   "show ID",
			Short: "Print one incident with its failing spans marked",
			Long: `Print one incident: what was decided, the timings and every finding with its byte
offsets. When the output text was recorded (only if the config allows logging outputs),
the text is printed with each failing span marked: underlined in red on a terminal,
between ⟦ and ⟧ otherwise.`,
			Args: exactArgs(1, "an incident ID"),
			RunE: func(c *cobra.Command, args []string) error {
				id, err := strconv.ParseInt(args[0], 10, 64)
				if err != nil || id <= 0 {
					return usagef("incident ID must be a positive number, got %q", args[0])
				}
				st, err := openIncidents(db)
				if err != nil {
					return err
				}
				defer st.Close()
				inc, err := st.Get(c.Context(), id)
				if errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("no incident %d in %s", id, st.Path())
				}
				if err != nil {
					return err
				}
				if asJSON {
					out := struct {
						store.Incident
						Segments []store.Segment `json:"segments,omitempty"`
					}{Incident: inc}
					if inc.HasText {
						out.Segments = store.Segments(inc.Text, inc.Findings)
					}
					enc := json.NewEncoder(stdio.Out)
					enc.SetIndent("", "  ")
					return enc.Encode(out)
				}
				ansi := logging.IsTerminal(stdio.Out) && os.Getenv("NO_COLOR") == ""
				writeIncident(stdio.Out, inc, ansi)
				return nil
			},
		})
		return cmd
	})
}

// openIncidents opens the incident log for reading; unlike store.Open it
// refuses to create a new, empty file where the user mistyped a path.
func openIncidents(path string) (store.Log, error) {
	if path == "" {
		path = store.DefaultPath()
	}
	if store.IsPostgres(path) {
		return store.OpenPostgres(context.Background(), path, store.Options{})
	}
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no incident log at %s (aegis serve writes it; name another with --incidents-db)", path)
	}
	return store.Open(path, store.Options{})
}

// parseSince accepts a Go duration, a number of days ("7d") or an RFC 3339
// time, and returns the earliest time to show.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseFloat(d, 64); err == nil && n >= 0 {
			return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("--since %q: want a duration such as 30m, 1h or 7d, or an RFC 3339 time", s)
	}
	return now.Add(-d), nil
}

func reasonList() string {
	var rs []string
	for _, r := range validator.Reasons {
		rs = append(rs, string(r))
	}
	return strings.Join(rs, ", ")
}

func writeIncidentTable(w io.Writer, list []store.Incident) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTIME\tKIND\tREASON\tACTION\tRISK\tUPSTREAM\tMODEL\tREQUEST\tFINDINGS")
	for _, inc := range list {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", inc.ID, inc.Time.Local().Format("2006-01-02 15:04:05"),
			inc.Kind, dash(string(inc.Reason)), inc.Action, inc.Risk, dash(inc.Upstream), dash(inc.Model), inc.RequestID, len(inc.Findings))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Marks around a failing span: ANSI underline + red on a terminal, white
// square brackets otherwise (they survive copy, paste and grep).
const (
	markOpen, markClose = "⟦", "⟧"
	ansiOpen, ansiClose = "\x1b[4;31m", "\x1b[0m"
)

func writeIncident(w io.Writer, inc store.Incident, ansi bool) {
	fmt.Fprintf(w, "incident %d: %s, %s -> %s (risk %s)\n", inc.ID, inc.Kind, dash(string(inc.Reason)), inc.Action, inc.Risk)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "time\t%s\n", inc.Time.Local().Format(time.RFC3339Nano))
	if inc.Attempt > 0 {
		fmt.Fprintf(tw, "request\t%s (attempt %d)\n", inc.RequestID, inc.Attempt)
	} else {
		fmt.Fprintf(tw, "request\t%s\n", inc.RequestID)
	}
	if inc.Gateway != "" {
		fmt.Fprintf(tw, "gateway\t%s\n", inc.Gateway)
	}
	fmt.Fprintf(tw, "route\t%s\n", dash(inc.Route))
	fmt.Fprintf(tw, "upstream\t%s\n", dash(inc.Upstream))
	fmt.Fprintf(tw, "model\t%s\n", dash(inc.Model))
	t := inc.Timings
	fmt.Fprintf(tw, "timings\tttft %s, verdict delay %s, duration %s, held back %d bytes, %d tokens\n",
		dur(t.TTFT), dur(t.VerdictDelay), dur(t.Duration), t.HeldBytes, t.Tokens)
	tw.Flush()
	fmt.Fprintf(w, "findings (%d)\n", len(inc.Findings))
	for i, f := range inc.Findings {
		loc := fmt.Sprintf("bytes %d-%d", f.Start, f.End)
		if f.End <= f.Start+1 {
			loc = fmt.Sprintf("at byte %d", f.Start)
		}
		fmt.Fprintf(w, "  [%d] %s %s, %s: %s", i+1, dash(f.Check), dash(string(f.Reason)), loc, f.Message)
		if f.Path != "" {
			fmt.Fprintf(w, " (at %s)", f.Path)
		}
		fmt.Fprintln(w)
	}
	if !inc.HasText {
		fmt.Fprintln(w, "text: not recorded (the config does not allow logging outputs)")
		return
	}
	open, close, how := markOpen, markClose, markOpen+" "+markClose
	if ansi {
		open, close, how = ansiOpen, ansiClose, "underlined"
	}
	fmt.Fprintf(w, "text (%d bytes; failing spans marked %s):\n", len(inc.Text), how)
	var b strings.Builder
	for _, s := range store.Segments(inc.Text, inc.Findings) {
		if len(s.Findings) > 0 {
			b.WriteString(open + s.Text + close)
		} else {
			b.WriteString(s.Text)
		}
	}
	fmt.Fprintln(w, b.String())
}

func dur(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return d.Round(time.Microsecond).String()
}

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/aegis-sentinel/aegis/internal/guard/classifier"
	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
	"github.com/aegis-sentinel/aegis/internal/guardlab/eval"
	"github.com/aegis-sentinel/aegis/internal/guardlab/peer"
)

// runPeers measures the embedded guard and the npm guards on the same
// evaluation-only texts and prints them side by side.
func runPeers(ctx context.Context, stdio *IO, root string, aegis eval.Scorer, asJSON bool) error {
	t, err := dataset.LoadPeerTable(root)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	cols := []*eval.Column{}
	c, err := eval.Compare(ctx, "aegis", aegis, classifier.HeadInjection, t, nil)
	if err != nil {
		return err
	}
	cols = append(cols, c)
	var note string
	dir, err := peer.CacheDir()
	if err == nil {
		err = peer.Install(ctx, dir, stdio.Err)
	}
	switch {
	case errors.Is(err, peer.ErrNoNode):
		note = "npm guards left out: " + err.Error()
	case err != nil:
		return fmt.Errorf("eval: %w", err)
	default:
		for _, spec := range peer.Peers {
			s, err := peer.Start(ctx, dir, spec.Name)
			if err != nil {
				return fmt.Errorf("eval: %w", err)
			}
			c, err := eval.Compare(ctx, spec.Name+" "+spec.Version, s, classifier.HeadInjection, t, nil)
			cerr := s.Close()
			if err != nil {
				return err
			}
			if cerr != nil {
				return fmt.Errorf("eval: %w", cerr)
			}
			cols = append(cols, c)
		}
	}
	if asJSON {
		for _, c := range cols {
			fixNaN(c.RecallAt1FPR...)
		}
		enc := json.NewEncoder(stdio.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Rows    []string       `json:"rows"`
			Pool    string         `json:"pool"`
			Columns []*eval.Column `json:"columns"`
			Note    string         `json:"note,omitempty"`
		}{rowNames(t), dataset.PoolNote(t), cols, note})
	}
	printPeerTable(stdio.Out, t, cols)
	for _, spec := range peer.Peers {
		if note == "" {
			fmt.Fprintf(stdio.Out, "%s %s: %s\n", spec.Name, spec.Version, spec.What)
		}
	}
	if note != "" {
		fmt.Fprintln(stdio.Out, note)
	}
	return nil
}

func rowNames(t *dataset.PeerTable) []string {
	var out []string
	for _, r := range t.Rows {
		out = append(out, r.Name)
	}
	return out
}

func fixNaN(vs ...float64) {
	for i := range vs {
		if math.IsNaN(vs[i]) {
			vs[i] = -1
		}
	}
}

func printPeerTable(w io.Writer, t *dataset.PeerTable, cols []*eval.Column) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	hdr := []string{"set"}
	for _, c := range cols {
		hdr = append(hdr, c.Guard)
	}
	row := func(name string, f func(*eval.Column) string) {
		cells := []string{name}
		for _, c := range cols {
			cells = append(cells, f(c))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	fmt.Fprintln(tw, strings.Join(hdr, "\t")+"\t")
	for i, r := range t.Rows {
		row(r.Name+", recall@1% FPR", func(c *eval.Column) string { return pct(c.RecallAt1FPR[i]) })
	}
	row(fmt.Sprintf("false positives at the default threshold (%d benign)", len(t.Pool)), func(c *eval.Column) string { return pct(c.PoolFPR) })
	row("  of which XSTest safe prompts flagged", func(c *eval.Column) string { return pct(c.XSTestFlagged) })
	row(fmt.Sprintf("NotInject over-defense accuracy (%d benign)", len(t.NotInject)), func(c *eval.Column) string { return pct(c.NotInject) })
	var keys []string
	for k := range cols[0].NotInjectBy {
		keys = append(keys, k)
	}
	// Files first, in trigger-word order, then categories by name.
	rank := func(k string) int {
		switch k {
		case "file one":
			return 0
		case "file two":
			return 1
		case "file three":
			return 2
		}
		return 3
	}
	sort.Slice(keys, func(i, j int) bool {
		if ri, rj := rank(keys[i]), rank(keys[j]); ri != rj {
			return ri < rj
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		row("  NotInject "+k, func(c *eval.Column) string { return pct(c.NotInjectBy[k]) })
	}
	row("p50 / p99 ms per text", func(c *eval.Column) string { return fmt.Sprintf("%.3f / %.3f", c.P50ms, c.P99ms) })
	row("errors", func(c *eval.Column) string { return fmt.Sprint(c.Errors) })
	tw.Flush()
	fmt.Fprintf(w, "Negatives for recall@1%% FPR and false positives: %s. The embedded guard's prompt_injection head at its own\n"+
		"thresholds; each npm guard with its defaults. All sets are evaluation-only.\n", dataset.PoolNote(t))
}

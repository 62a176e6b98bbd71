package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/aegis-sentinel/aegis/internal/guard"
	"github.com/aegis-sentinel/aegis/internal/guardlab/dataset"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// agentRow is one row of the agent table.
type agentRow struct {
	Group   string  `json:"group"`
	Label   int     `json:"label"`
	N       int     `json:"n"`
	Flagged int     `json:"flagged"`
	Rate    float64 `json:"rate"`
	// At1FPR is the share flagged at the threshold that flags 1% of
	// AgentDojo's benign tool outputs (-1 for the document rows).
	At1FPR float64 `json:"rate_at_1pct_fpr"`
}

// agentConversation places an item as the gateway sees it: the user's
// request, the assistant's call, the tool's result.
func agentConversation(it dataset.AgentItem) *validator.Request {
	if it.Tool == "" {
		return &validator.Request{Messages: []validator.Message{{Role: "user", Content: it.Text}}}
	}
	return &validator.Request{Messages: []validator.Message{
		{Role: "user", Content: it.User},
		{Role: "assistant", ToolCalls: []validator.ToolCall{{ID: "call_1", Name: it.Tool, Arguments: it.Args}}},
		{Role: "tool", ToolCallID: "call_1", Content: it.Text},
	}}
}

// runAgentEval prints the agent table: each text screened by the default
// input policy (user messages at high risk, tool results at medium) in
// the conversation it belongs to.
func runAgentEval(ctx context.Context, w io.Writer, root string, g *guard.Guard, asJSON bool) error {
	check, err := g.InputCheck(guard.DefaultInputPolicy())
	if err != nil {
		return err
	}
	var items []dataset.AgentItem
	for _, load := range []func(string) ([]dataset.AgentItem, error){
		dataset.AgentDojoInjected, dataset.InjecAgent, dataset.AgentDojoBenign, dataset.AgentDojoUserTasks,
	} {
		its, err := load(root)
		if err != nil {
			return fmt.Errorf("eval: %w", err)
		}
		items = append(items, its...)
	}
	type scored struct {
		group   string
		label   int
		flagged bool
		score   float64
		benign  bool // an AgentDojo benign tool output (sets the 1% threshold)
		result  bool // a tool result (the threshold applies)
	}
	var ss []scored
	for _, it := range items {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		v := check(ctx, agentConversation(it))
		s := scored{group: it.Group, label: it.Label, flagged: v != nil && v.Action == validator.ActionBlock,
			benign: strings.HasPrefix(it.Group, "agentdojo-benign/"), result: it.Tool != ""}
		if s.result {
			ts := g.ScoreToolResult(it.Text)
			s.score = float64(ts.Risk) + float64(ts.Prob)
		}
		ss = append(ss, s)
	}
	// The threshold that flags at most 1% of the benign tool outputs.
	var neg []float64
	for _, s := range ss {
		if s.benign {
			neg = append(neg, s.score)
		}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(neg)))
	allow := len(neg) / 100
	thr := 0.0
	if len(neg) > allow {
		thr = neg[allow] + 1e-9 // scores above the (allow+1)-th highest
	}
	rows := map[string]*agentRow{}
	var order []string
	add := func(key string, s scored) {
		r, ok := rows[key]
		if !ok {
			r = &agentRow{Group: key, Label: s.label}
			rows[key] = r
			order = append(order, key)
		}
		r.N++
		if s.flagged {
			r.Flagged++
		}
		if s.result && s.score >= thr {
			r.At1FPR++
		}
	}
	for _, s := range ss {
		top := s.group
		if i := strings.IndexByte(top, '/'); i >= 0 {
			top = top[:i]
		}
		add(top, s)
		add(s.group, s)
	}
	out := make([]agentRow, 0, len(order))
	for _, k := range order {
		r := rows[k]
		r.Rate = float64(r.Flagged) / float64(r.N)
		r.At1FPR /= float64(r.N)
		out = append(out, *r)
	}
	docs, err := docRows(ctx, check)
	if err != nil {
		return err
	}
	out = append(out, docs...)
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "set\tlabel\tn\tflagged\tshare flagged\tat 1% FPR\t\n")
	for _, r := range out {
		name := r.Group
		if strings.Contains(name, "/") {
			name = "  " + name
		}
		label := "injected"
		if r.Label == 0 {
			label = "benign"
		}
		at := pct(r.At1FPR)
		if strings.HasPrefix(r.Group, "agentdojo-user-tasks") || r.At1FPR < 0 {
			at = "" // user messages: the tool-result threshold does not apply
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t\n", name, label, r.N, r.Flagged, pct(r.Rate), at)
	}
	tw.Flush()
	fmt.Fprintf(w, "Default policy: user messages block at high risk, tool results at medium. \"at 1%% FPR\": the tool-result\n"+
		"score threshold that flags at most 1%% of the %d AgentDojo benign tool outputs (%.3f).\n"+
		"documents-heldout: the held-out part of the benign document corpus (ordinary files of this machine and the\n"+
		"project's own e-mails and API answers), each as a read_file result, by kind and by length.\n", len(neg), thr)
	return nil
}

package cli

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/aegis-sentinel/aegis/internal/guard"
	"github.com/aegis-sentinel/aegis/internal/guardlab/doccorpus"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// docConversation places an ordinary file as an agent reads it: the
// user's request, a read_file call, the file as its result.
func docConversation(d doccorpus.Doc) *validator.Request {
	return &validator.Request{Messages: []validator.Message{
		{Role: "user", Content: "Read this file and summarise what it is for."},
		{Role: "assistant", ToolCalls: []validator.ToolCall{{ID: "call_1", Name: "read_file", Arguments: `{"path":"` + d.Path + `"}`}}},
		{Role: "tool", ToolCallID: "call_1", Content: d.Text},
	}}
}

// docRows screens the held-out part of the benign document corpus (see
// package doccorpus) as read_file results with check and returns one row
// for the part, one per kind and one per length class. The training part
// is left out: the document thresholds were calibrated on it.
func docRows(ctx context.Context, check func(context.Context, *validator.Request) *validator.Verdict) ([]agentRow, error) {
	docs, err := doccorpus.Build(doccorpus.DefaultOptions())
	if err != nil {
		return nil, fmt.Errorf("eval: %w", err)
	}
	_, held := doccorpus.Split(docs)
	rows := map[string]*agentRow{}
	var order []string
	add := func(key string, flagged bool) {
		r, ok := rows[key]
		if !ok {
			r = &agentRow{Group: key}
			rows[key] = r
			order = append(order, key)
		}
		r.N++
		if flagged {
			r.Flagged++
		}
	}
	// Rows in a fixed order: the part, then kinds, then lengths.
	add("documents-heldout", false)
	rows["documents-heldout"].N--
	for _, k := range doccorpus.Kinds {
		add("documents-heldout/"+string(k), false)
		rows["documents-heldout/"+string(k)].N--
	}
	for _, b := range doccorpus.LengthBuckets {
		add("documents-heldout/"+b, false)
		rows["documents-heldout/"+b].N--
	}
	for _, d := range held {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		v := check(ctx, docConversation(d))
		flagged := v != nil && v.Verdict == validator.Fail
		add("documents-heldout", flagged)
		add("documents-heldout/"+string(d.Kind), flagged)
		add("documents-heldout/"+doccorpus.LengthBucket(len(d.Text)), flagged)
	}
	var out []agentRow
	for _, k := range order {
		r := rows[k]
		if r.N == 0 {
			continue
		}
		r.Rate = float64(r.Flagged) / float64(r.N)
		r.At1FPR = -1 // not a tool-result score threshold row
		out = append(out, *r)
	}
	return out, nil
}

// printDocCalibration prints the document thresholds calibrated on the
// training part of the corpus, in the form the guard's table takes.
func printDocCalibration(w io.Writer, g *guard.Guard) error {
	docs, err := doccorpus.Build(doccorpus.DefaultOptions())
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	train, _ := doccorpus.Split(docs)
	texts := make([]string, len(train))
	for i, d := range train {
		texts[i] = d.Text
	}
	cal := g.CalibrateDocs(texts)
	kinds := make([]guard.DocKind, 0, len(cal))
	for k := range cal {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return kinds[i] < kinds[j] })
	fmt.Fprintf(w, "window-score tails (T0, Beta) fitted on the %d training documents:\n", len(train))
	for _, k := range kinds {
		fmt.Fprintf(w, "\t%s: {%g, %g},\n", k, cal[k].T0, cal[k].Beta)
	}
	return nil
}

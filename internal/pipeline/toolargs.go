package pipeline

import (
	"strconv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/toolcalls"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// segment is one piece of the text an argument reader is fed: a value, a
// decoding of one, or one side of a seam between two values, at
// [start, start+len(text)) of that text.
type segment struct {
	start int
	off   int // where text begins in the value
	path  string
	how   string
	text  string
	seam  bool // one side of a seam: touches the next (or previous) segment
}

// seam is how much of each side of the boundary between two values the
// joined read sees: a secret or credential up to 65 bytes long split anywhere.
const seam = 64

// argText lays out what the text checks read of one call, one line each:
// every string value and its decodings; then, when there are several
// values, each boundary between two neighbours with the end of the one
// joined to the start of the next and nothing between them (a secret
// split across two fields). It appends to segs and text (emptied).
func argText(vals []toolcalls.Value, segs []segment, text []byte) ([]segment, []byte) {
	segs, text = segs[:0], text[:0]
	add := func(path, how, t string, off int, isSeam, newline bool) {
		segs = append(segs, segment{start: len(text), off: off, path: path, how: how, text: t, seam: isSeam})
		text = append(text, t...)
		if newline {
			text = append(text, '\n')
		}
	}
	for _, v := range vals {
		add(v.Path, "", v.Text, 0, false, true)
		for _, d := range toolcalls.Derived(v.Text) {
			add(v.Path, d.How, d.Text, 0, false, true)
		}
	}
	for i := 1; i < len(vals); i++ {
		a, b := vals[i-1], vals[i]
		cut := max(0, len(a.Text)-seam)
		add(a.Path, "", a.Text[cut:], cut, true, false)
		add(b.Path, "", b.Text[:min(len(b.Text), seam)], 0, true, true)
	}
	return segs, text
}

// argReader is an enabled check that reads argument values.
type argReader struct {
	c policy.Check
}

// readArguments runs the argument-reading checks over call's values and
// returns their findings, located at the value (tool_calls/N/arguments/
// path) with offsets into the text that was read.
func (a *Attempt) readArguments(call validator.ToolCall) []validator.Finding {
	if len(a.argReaders) == 0 || call.Arguments == "" {
		return nil
	}
	segs, text := argText(toolcalls.Of(call).Values, a.argSegs, a.argBuf)
	a.argSegs, a.argBuf = segs, text
	if len(segs) == 0 {
		return nil
	}
	base := "tool_calls/" + strconv.Itoa(call.Index) + "/arguments"
	var out []validator.Finding
	seen := map[string]bool{}
	for _, r := range a.argReaders {
		v, err := r.c.Spec.Arguments(r.c.Config, a.req)
		if err != nil || v == nil {
			continue
		}
		if b, ok := v.(validator.Background); ok {
			// A judgement that answers later (a guard model) is not
			// asked here; the call is judged by the checks that answer
			// at once.
			b.Stop()
			continue
		}
		v.Write(text)
		v.Close()
		for _, f := range v.Findings() {
			if f.Reason == validator.ReasonNone {
				continue
			}
			g, ok := locate(f, segs, base, call.Name)
			if !ok {
				continue
			}
			key := g.Check + "\x00" + string(g.Reason) + "\x00" + g.Path + "\x00" + strconv.Itoa(g.Start)
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, g)
		}
	}
	return out
}

// locate maps a finding over the laid-out text back to its value.
func locate(f validator.Finding, segs []segment, base, tool string) (validator.Finding, bool) {
	i := len(segs) - 1
	for i > 0 && segs[i].start > f.Start {
		i--
	}
	s := segs[i]
	last := i
	for last+1 < len(segs) && segs[last+1].start < f.End {
		last++
	}
	if s.seam && last == i {
		return f, false // inside one value: its own line reports it
	}
	g := f
	g.Start = f.Start - s.start
	if g.Start < 0 {
		g.Start = 0
	}
	g.End = f.End - s.start
	if g.End > len(s.text) {
		g.End = len(s.text)
	}
	g.Start += s.off
	g.End += s.off
	if g.End < g.Start {
		g.End = g.Start
	}
	g.Path = base
	if s.path != "" {
		g.Path += "/" + s.path
	}
	var where strings.Builder
	where.WriteString(" (in the arguments of ")
	where.WriteString(strconv.Quote(tool))
	if s.how != "" {
		where.WriteString(", ")
		where.WriteString(s.how)
	}
	if last > i {
		where.WriteString(", split across ")
		for k := i; k <= last; k++ {
			if k > i {
				where.WriteString(" and ")
			}
			where.WriteString(strconv.Quote(segs[k].path))
		}
	}
	where.WriteString(")")
	g.Message = f.Message + where.String()
	return g, true
}

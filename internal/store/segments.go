package store

import (
	"slices"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Segment is one piece of an incident's text: either outside every
// finding (Findings empty) or inside the findings listed by index.
// Concatenating the segments of a text gives the text back.
type Segment struct {
	Start    int    `json:"start"`
	End      int    `json:"end"`
	Text     string `json:"text"`
	Findings []int  `json:"findings,omitempty"`
}

// Segments cuts text at the byte offsets of findings so that a viewer can
// mark the failing spans (the CLI with ⟦ ⟧ or underline, the dashboard
// with <mark>). Offsets out of range are clamped, a span with End <= Start
// marks the one character at Start, and cuts are moved outwards to whole
// UTF-8 characters so no character is split.
func Segments(text string, findings []validator.Finding) []Segment {
	n := len(text)
	type span struct{ start, end int }
	spans := make([]span, len(findings))
	cuts := []int{0, n}
	for i, f := range findings {
		s, e := clamp(f.Start, n), clamp(f.End, n)
		if e <= s {
			e = s + 1
			if e > n {
				s, e = max(n-1, 0), n
			}
		}
		s = runeStart(text, s)
		e = runeEnd(text, e)
		spans[i] = span{s, e}
		cuts = append(cuts, s, e)
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	var out []Segment
	for i := 0; i+1 < len(cuts); i++ {
		s, e := cuts[i], cuts[i+1]
		var in []int
		for j, sp := range spans {
			if sp.start <= s && e <= sp.end && sp.start < sp.end {
				in = append(in, j)
			}
		}
		if k := len(out) - 1; k >= 0 && slices.Equal(out[k].Findings, in) {
			out[k].End = e
			out[k].Text = text[out[k].Start:e]
			continue
		}
		out = append(out, Segment{Start: s, End: e, Text: text[s:e], Findings: in})
	}
	return out
}

func clamp(v, n int) int { return min(max(v, 0), n) }

// runeStart moves i back to the first byte of the character it is in.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// runeEnd moves i forward past the character it is inside of.
func runeEnd(s string, i int) int {
	for i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

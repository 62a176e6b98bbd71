package regex

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// maxFindings bounds the findings kept for one output.
const maxFindings = 64

// Validator is the regex check for one attempt.
type Validator struct {
	set      *Set
	buf      []byte // output[bufStart:cur]
	bufStart int
	cur      int
	from     []int // per rule: first offset where a match may still start
	pre      []preState
	done     []bool // per require rule: matched
	findings []validator.Finding
	settled  int
	closed   bool
}

// New returns a validator for one output.
func (s *Set) New() *Validator {
	return &Validator{
		set:  s,
		buf:  make([]byte, 0, 256),
		from: make([]int, len(s.rules)),
		pre:  newPreStates(len(s.rules)),
		done: make([]bool, len(s.rules)),
	}
}

// Name implements validator.Validator.
func (v *Validator) Name() string { return Name }

// Write implements validator.Validator.
func (v *Validator) Write(p []byte) (int, error) {
	if v.closed || len(p) == 0 {
		return len(p), nil
	}
	v.buf = append(v.buf, p...)
	v.cur += len(p)
	v.scanAll(false)
	return len(p), nil
}

func (v *Validator) scanAll(final bool) {
	for i := range v.set.rules {
		if !v.done[i] {
			v.scan(i, final)
		}
	}
	// Keep one byte of context before the earliest offset still needed,
	// so \b and ^ see what precedes it.
	keep := v.cur
	for i := range v.set.rules {
		if !v.done[i] && v.from[i] < keep {
			keep = v.from[i]
		}
	}
	if keep > 0 {
		keep--
	}
	if k := keep - v.bufStart; k > 0 {
		n := copy(v.buf, v.buf[k:])
		v.buf = v.buf[:n]
		v.bufStart = keep
	}
}

// at returns the buffered output from absolute offset off.
func (v *Validator) at(off int) []byte { return v.buf[off-v.bufStart:] }

// scan finds the complete matches of rule i from its resume point and
// moves the resume point to where a match may still be in progress.
func (v *Validator) scan(i int, final bool) {
	r := &v.set.rules[i]
	for {
		from := v.from[i]
		ctx := 0
		if from > v.bufStart {
			ctx = 1
		}
		seg := v.at(from - ctx)
		if !r.pre.mayMatchAt(&v.pre[i], v.buf, v.bufStart, from-ctx) {
			break
		}
		loc := r.re.FindIndex(seg)
		if loc != nil && loc[0] < ctx {
			// The leftmost match starts at the context byte: find the
			// leftmost one after it, with the context still in view.
			loc = nil
			if m := r.after.FindSubmatchIndex(seg); m != nil {
				loc = m[2:4]
			}
		}
		if loc == nil {
			break
		}
		s, e := from-ctx+loc[0], from-ctx+loc[1]
		if r.require {
			// Any match satisfies a require rule; one whose bytes and
			// lookahead are all known is a match in the final text.
			if e < v.cur || final {
				v.done[i] = true
				v.from[i] = v.cur
				return
			}
			v.from[i] = s
			return
		}
		if e == s { // an empty match judges nothing
			if s >= v.cur {
				break
			}
			v.from[i] = s + 1
			continue
		}
		long := false
		switch {
		case final:
		case r.noSpace && hasSpace(v.at(e)):
			// The match cannot grow across the space that follows it,
			// and no earlier match can still be in progress.
		case r.maxLen >= 0 && v.cur > s+r.maxLen:
			// No match of this rule can reach past what has arrived.
		case v.cur-s >= v.set.max:
			long = true
		default:
			// The match may still grow (or an earlier one complete):
			// hold it back and judge it when more text has arrived.
			v.from[i] = s
			return
		}
		if long {
			// Judge a long match on exactly max_match_bytes from its
			// start, so the result does not depend on the chunking.
			e = v.windowEnd(r, s)
		}
		v.report(validator.Finding{
			Check: Name, Reason: r.reason, Start: s, End: e,
			Message: fmt.Sprintf("output matches deny rule %q: %q", r.name, clip(v.at(s)[:e-s])),
		})
		v.from[i] = e
	}
	v.from[i] = v.holdFrom(r, v.from[i])
}

// windowEnd returns the end of the match of r at s within the next
// max_match_bytes bytes (s + max_match_bytes when it does not end there).
func (v *Validator) windowEnd(r *rule, s int) int {
	ctx := 0
	if s > v.bufStart {
		ctx = 1
	}
	seg := v.at(s - ctx)
	seg = seg[:min(len(seg), ctx+v.set.max)]
	var l []int
	if ctx == 0 {
		l = r.re.FindIndex(seg)
	} else if m := r.after.FindSubmatchIndex(seg); m != nil {
		l = m[2:4]
	}
	if l != nil && l[0] == ctx && l[1] > l[0] {
		return s - ctx + l[1]
	}
	return s + min(v.set.max, v.cur-s)
}

func hasSpace(b []byte) bool {
	for _, c := range b {
		switch c {
		case ' ', '\n', '\t', '\r', '\f':
			return true
		}
	}
	return false
}

// holdFrom returns the earliest offset at or after from where a match of
// r may still be in progress, never earlier than cur - max_match_bytes
// (or cur - the rule's longest possible match, when that is shorter).
func (v *Validator) holdFrom(r *rule, from int) int {
	h := from
	tail := v.at(from)
	if r.noSpace {
		// A match in progress cannot contain whitespace.
		if k := lastSpace(tail); k >= 0 {
			h = from + k + 1
			tail = tail[k+1:]
		}
	}
	if r.prefix != "" {
		// A match in progress starts with the literal prefix: at its first
		// occurrence, or at a partial prefix at the very end.
		if k := bytes.Index(tail, []byte(r.prefix)); k >= 0 {
			h += k
		} else {
			h = v.cur - partialPrefix(tail, r.prefix)
		}
	}
	reach := v.set.max
	if r.maxLen >= 0 && r.maxLen < reach {
		reach = r.maxLen // no match of this rule is longer
	}
	return max(h, v.cur-reach, from)
}

func lastSpace(b []byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		switch b[i] {
		case ' ', '\n', '\t', '\r', '\f':
			return i
		}
	}
	return -1
}

// partialPrefix returns the length of the longest proper prefix of p that
// ends b.
func partialPrefix(b []byte, p string) int {
	for k := min(len(p)-1, len(b)); k > 0; k-- {
		if string(b[len(b)-k:]) == p[:k] {
			return k
		}
	}
	return 0
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

func (v *Validator) report(f validator.Finding) {
	if len(v.findings) >= maxFindings {
		return
	}
	v.findings = append(v.findings, f)
	sort.SliceStable(v.findings, func(a, b int) bool { return v.findings[a].Start < v.findings[b].Start })
}

// Settled implements validator.Validator: the earliest point where a deny
// match may still be in progress.
func (v *Validator) Settled() int {
	s := v.cur
	for i, r := range v.set.rules {
		if !r.require && v.from[i] < s {
			s = v.from[i]
		}
	}
	if s > v.settled {
		v.settled = s
	}
	return v.settled
}

// Findings implements validator.Validator.
func (v *Validator) Findings() []validator.Finding { return v.findings }

// Close implements validator.Validator: pending matches are judged and
// require rules that never matched fail at the end.
func (v *Validator) Close() {
	if v.closed {
		return
	}
	v.scanAll(true)
	v.closed = true
	for i, r := range v.set.rules {
		if r.require && !v.done[i] {
			v.report(validator.Finding{
				Check: Name, Reason: r.reason, Start: v.cur, End: v.cur,
				Message: fmt.Sprintf("output never matches required rule %q", r.name),
			})
		}
		v.from[i] = v.cur
	}
}

func newPreStates(n int) []preState {
	st := make([]preState, n)
	for i := range st {
		st[i].litAt = -1
	}
	return st
}

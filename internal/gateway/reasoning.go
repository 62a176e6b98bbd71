package gateway

import (
	"bytes"
	"time"

	"github.com/aegis-sentinel/aegis/internal/policy"
)

// Reasoning is output (policy reasoning: check | hide | pass). Checked,
// a piece of reasoning enters the output text like the answer's text,
// under the same release point, fed to the checks with FeedReasoning; the
// releaser marks it (reasoning spelled in its own field, or hidden) so
// that the client gets it as the upstream spelled it, or not at all, and
// a whole body carries the answer and the reasoning apart. Passed, it
// goes out in its place unchecked.

// thinkOpen and thinkClose delimit reasoning the model leaves inline in
// its text (a server whose reasoning format is none).
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// thinkState follows a <think> section at the start of an attempt's text.
type thinkState uint8

const (
	thinkUndecided thinkState = iota // only white space so far
	thinkInside                      // in the section
	thinkDone                        // the text is the answer
)

// splitThink returns how many bytes of the text piece t are inline
// reasoning: the piece's head, up to and with the closing tag. prev is
// the attempt's text before t (the output from textFrom).
func (s *attemptState) splitThink(prev, t []byte) int {
	var buf [32]byte
	switch s.think {
	case thinkDone:
		return 0
	case thinkUndecided:
		// prev holds white space and perhaps the head of the tag.
		sofar := bytes.TrimLeft(append(append(buf[:0], bytes.TrimLeft(prev, " \t\r\n")...), t...), " \t\r\n")
		switch {
		case len(sofar) == 0:
			return 0
		case bytes.HasPrefix(sofar, []byte(thinkOpen)):
			s.think = thinkInside
		case len(sofar) < len(thinkOpen) && bytes.HasPrefix([]byte(thinkOpen), sofar):
			return len(t) // a tag cut across pieces: reasoning until told otherwise
		default:
			s.think = thinkDone
			return 0
		}
	}
	// Inside: look for the closing tag from a little before this piece
	// (a tag cut across pieces).
	k := min(len(prev), len(thinkClose)-1)
	win := append(append(buf[:0], prev[len(prev)-k:]...), t...)
	if len(t) > len(buf)-k {
		win = append(append([]byte(nil), prev[len(prev)-k:]...), t...)
	}
	i := bytes.Index(win, []byte(thinkClose))
	if i < 0 {
		return len(t)
	}
	s.think = thinkDone
	return i + len(thinkClose) - k
}

// thinkAt is the <think> state at the end of a released prefix.
func thinkAt(prefix []byte) thinkState {
	var s attemptState
	s.splitThink(nil, prefix)
	return s.think
}

// feedReasoning takes the chunk's reasoning (a field of its own) under
// the policy's mode; it reports whether the checks were fed.
func (x *exchange) feedReasoning(chk Checker, p []byte, c *chunk, at time.Time, mode policy.Reasoning) bool {
	s := &x.cur
	if x.tally.firstUp.IsZero() {
		x.tally.firstUp = at
	}
	if !mode.Checked() {
		s.passed = append(s.passed, c.reasoning...)
		if x.req.stream && !c.hasText {
			x.out.hold(p) // goes out in its place, after the text before it
		}
		s.step = chk.Progress(at, true)
		return true
	}
	raw, owned := p, false
	if c.hasText && x.req.stream && mode != policy.ReasoningHide {
		// Reasoning and text in one payload: each goes out as a chunk of
		// its own, spelled from the event.
		raw, owned = x.out.spellReasoning(c.reasoning), true
	}
	start := x.out.acceptReasoning(raw, c.reasoning, mode == policy.ReasoningHide, true, owned)
	s.step = chk.FeedReasoning(x.out.text[start:], at)
	return true
}

// feedText takes the chunk's text: the head of a <think> section is
// reasoning; the rest is the answer.
func (x *exchange) feedText(chk Checker, p []byte, c *chunk, at time.Time, mode policy.Reasoning, mixed bool) {
	s := &x.cur
	if x.tally.firstUp.IsZero() {
		x.tally.firstUp = at
	}
	n := 0
	if s.think != thinkDone && mode.Checked() {
		n = s.splitThink(x.out.text[s.textFrom:], c.text)
	}
	if n == 0 {
		if mixed {
			start := x.out.accept(x.out.wire.appendChunk(nil, x.out.tpl, c.text, ""), c.text)
			x.out.pending[len(x.out.pending)-1].owned = x.req.stream
			s.step = chk.Feed(x.out.text[start:], at)
			return
		}
		start := x.out.accept(p, c.text)
		s.step = chk.Feed(x.out.text[start:], at)
		return
	}
	hide := mode == policy.ReasoningHide
	if n == len(c.text) && !mixed {
		raw := p
		if hide {
			raw = nil
		}
		start := x.out.acceptReasoning(raw, c.text, hide, false, false)
		s.step = chk.FeedReasoning(x.out.text[start:], at)
		return
	}
	// The section ends inside this piece: its head is reasoning, its tail
	// the answer, each spelled as a chunk of its own.
	head, tail := c.text[:n], c.text[n:]
	var raw []byte
	if !hide {
		raw = x.out.wire.appendChunk(nil, x.out.tpl, head, "")
	}
	start := x.out.acceptReasoning(raw, head, hide, false, true)
	s.step = chk.FeedReasoning(x.out.text[start:], at)
	if len(tail) > 0 && !s.step.Failed {
		start = x.out.accept(x.out.wire.appendChunk(nil, x.out.tpl, tail, ""), tail)
		if x.req.stream {
			x.out.pending[len(x.out.pending)-1].owned = true
		}
		s.step = chk.Feed(x.out.text[start:], at)
	}
}

// spellReasoning spells a chunk of reasoning text for the client.
func (r *releaser) spellReasoning(text []byte) []byte {
	if w, ok := r.wire.(reasoningWriter); ok {
		return w.appendReasoning(nil, r.tpl, text)
	}
	return r.wire.appendChunk(nil, r.tpl, text, "")
}

// acceptReasoning appends a piece of reasoning to the output, as accept
// does text: field says it is spelled in a field of its own (else inline
// in the text), hidden that the client never gets it (raw may then be
// nil), owned that raw is a buffer of its own (not the reader's). It
// returns where the piece starts.
func (r *releaser) acceptReasoning(raw, text []byte, hidden, field, owned bool) int {
	start := len(r.text)
	r.text = append(r.text, text...)
	r.tokens = append(r.tokens, tokenSpan{start, len(r.text)})
	sp := tokenSpan{start, len(r.text)}
	r.rsn = appendSpan(r.rsn, sp)
	if field {
		r.fieldRsn = appendSpan(r.fieldRsn, sp)
	}
	if hidden {
		r.hidden = appendSpan(r.hidden, sp)
	}
	if r.streamed {
		r.pending = append(r.pending, pend{raw: raw, start: start, end: len(r.text), reasoning: field, hidden: hidden, owned: owned || raw == nil})
	}
	return start
}

// appendSpan appends sp to spans, merged with the last when they touch.
func appendSpan(spans []tokenSpan, sp tokenSpan) []tokenSpan {
	if n := len(spans); n > 0 && spans[n-1].end == sp.start {
		spans[n-1].end = sp.end
		return spans
	}
	return append(spans, sp)
}

// trimSpans drops what of spans lies past n (a new attempt restarts the
// text there).
func trimSpans(spans []tokenSpan, n int) []tokenSpan {
	out := spans[:0]
	for _, s := range spans {
		if s.start >= n {
			break
		}
		s.end = min(s.end, n)
		out = append(out, s)
	}
	return out
}

// inSpans reports whether offset o lies in spans.
func inSpans(spans []tokenSpan, o int) bool {
	for _, s := range spans {
		if o >= s.start && o < s.end {
			return true
		}
	}
	return false
}

// answerText is the answer of text[:n]: without the reasoning spelled
// in its own field and without what is hidden.
func (r *releaser) answerText(n int) []byte {
	if len(r.fieldRsn) == 0 && len(r.hidden) == 0 {
		return r.text[:n]
	}
	out := make([]byte, 0, n)
	for i := 0; i < n; i++ {
		if !inSpans(r.fieldRsn, i) && !inSpans(r.hidden, i) {
			out = append(out, r.text[i])
		}
	}
	return out
}

// reasoningText is the reasoning of the output the client may get in a
// whole body: the field reasoning not hidden.
func (r *releaser) reasoningText() []byte {
	var out []byte
	for _, s := range r.fieldRsn {
		for i := s.start; i < s.end; i++ {
			if !inSpans(r.hidden, i) {
				out = append(out, r.text[i])
			}
		}
	}
	return out
}

// refeed feeds the released prefix text[:n] to a new attempt's checks,
// its reasoning as reasoning, marked as carried (carrier) so that the
// stall check still waits for the new attempt's first token: a retry of a
// long prompt spends its prefill before that token, not in a gap.
// carrier is the optional capability of a Checker that tells text carried
// over from an earlier attempt from the upstream's output
// (pipeline.Attempt has it).
type carrier interface{ Carry(n int) }

func (r *releaser) refeed(chk Checker, n int, at time.Time) {
	if c, ok := chk.(carrier); ok {
		c.Carry(n)
	}
	o := 0
	for _, sp := range r.rsn {
		if sp.start >= n {
			break
		}
		if sp.start > o {
			chk.Feed(r.text[o:sp.start], at)
		}
		end := min(sp.end, n)
		chk.FeedReasoning(r.text[sp.start:end], at)
		o = end
	}
	if o < n {
		chk.Feed(r.text[o:n], at)
	}
}

package secretrules

import "unsafe"

// Stream applies a Set to text that arrives in pieces, with the same
// matches however the text is split.
//
// The secret of every rule is one word (no white space, quotes, brackets
// or separators: gitleaks' secret groups are runs of key characters), so a
// rule is judged when a word ends: at the byte after it, or at Close. The keyword automaton
// runs over every byte; a word is judged only when a keyword ended in it
// or at most reach bytes before it (lineReach for the rules that allow any
// text between the two; an assignment "api_key = VALUE" puts
// the value a few bytes after its keyword), and only when it is at least
// minSecret bytes long. The rules see a window of the text from a little
// before the first keyword of the run to the white space after the word,
// so the context a rule reads ("stripe ... = VALUE") is there, and the
// judging points depend only on the bytes, not on how they arrived.
//
// Four shortcuts keep text full of keys cheap, each read from the rules'
// regexes when the set is compiled (literalFacts, startsAtKeyword): a
// keyword before the word does not wake a rule whose secret always holds
// a keyword (the previous line's "AKIA" cannot start this line's AWS
// key); a rule whose matches all begin at one of its keywords runs
// anchored at each of them in the word; a rule whose matches all hold a
// string its keywords do not (jwt's ".ey", woken by the "ey" of every
// "KEY") runs only on a window holding it; and a context rule that
// matched from a keyword when a word ended is not run from that keyword
// again for the words after it.
//
// Held reports where the word in progress begins: no match can start
// before it any more.
type Stream struct {
	set       *Set
	st        int32 // the automaton's state, as its row in trans
	buf       []byte
	bufStart  int // offset of buf[0]
	off       int
	wordStart int // offset of the word in progress, -1 between words
	// recent are the last keywords seen: where each ended and the rules
	// it wakes (an index into the automaton's outputs).
	recent  [16]hit
	nRecent int
	// near is the offset up to which a word may begin and still be
	// judged: the furthest any keyword seen reaches, -1 for none.
	near    int
	scratch []Match
	tried   []int // keyword starts an anchored rule was run at
	spans   []int // secret spans an anchored rule judged, start and end
	// found are the secret spans specific rules reported for the word in
	// hand, start and end: a generic rule's secret inside one gives way.
	found []int
	// settled are keyword offsets and anchored rules, in pairs: the rule
	// matched from that keyword (or over it) when an earlier word ended.
	settled []int
}

// judged reports whether the span s..e was judged for the rule in hand,
// and notes it.
func (z *Stream) judged(s, e int) bool {
	for i := 0; i+1 < len(z.spans); i += 2 {
		if z.spans[i] == s && z.spans[i+1] == e {
			return true
		}
	}
	z.spans = append(z.spans, s, e)
	return false
}

type hit struct {
	start, end int
	out        int32
}

const (
	// reach is how far after its keyword a rule's secret may begin.
	reach = 48
	// lineReach is that for the rules whose regex lets any text stand
	// between keyword and secret (a curl command's URL before its
	// header): a long command line.
	lineReach = 1024
	// before is how much text before a keyword a window keeps.
	before = 64
	// minSecret is the shortest word that is judged.
	minSecret = 8
	// maxBuf bounds the text kept; longer words are judged on their
	// last maxBuf bytes.
	maxBuf = 64 << 10
)

// NewStream starts a stream; buf, if not nil, is reused as its buffer.
func (s *Set) NewStream(buf []byte) *Stream {
	return &Stream{set: s, buf: buf[:0], wordStart: -1, near: -1}
}

// Buffer returns the stream's buffer for reuse by another stream.
func (z *Stream) Buffer() []byte { return z.buf[:0] }

// Held returns the offset before which no further match can start.
func (z *Stream) Held() int {
	if z.wordStart >= 0 {
		return z.wordStart
	}
	return z.off
}

// breaks marks the bytes that end a word: white space, quotes, brackets
// and separators, none of which a rule's secret group holds.
var breaks = func() (t [256]bool) {
	for _, c := range []byte(" \n\t\r\f\v\"'`(){}[]<>,;|\\") {
		t[c] = true
	}
	return t
}()

// Write feeds p and calls report for each match found in it.
func (z *Stream) Write(p []byte, report func(Match, string)) {
	a := &z.set.ac
	n := int32(a.classes)
	row := z.st // the state's row in a.trans
	start := 0
	for i, c := range p {
		x := a.trans[row+int32(a.class[c])]
		row = x &^ outFlag
		if x < 0 {
			st := row / n
			o := a.outAt[st]
			at := z.off + i + 1
			z.recent[z.nRecent%len(z.recent)] = hit{start: at - int(a.depth[st]), end: at, out: o}
			z.nRecent++
			z.near = max(z.near, at+z.set.outReach[o])
		}
		if breaks[c] {
			if z.wordStart >= 0 {
				z.append(p[start : i+1])
				start = i + 1
				z.endWord(z.off+i+1, report)
			}
		} else if z.wordStart < 0 {
			z.wordStart = z.off + i
		}
	}
	z.st = row
	z.append(p[start:])
	z.off += len(p)
	z.trim()
}

func (z *Stream) append(p []byte) {
	z.buf = append(z.buf, p...)
}

// trim drops text no window can reach any more.
func (z *Stream) trim() {
	keep := z.off - z.set.maxReach - before - z.set.ac.maxKey
	if z.wordStart >= 0 {
		keep = min(keep, z.wordStart-z.set.maxReach-before-z.set.ac.maxKey)
	}
	keep = max(keep, z.off-maxBuf)
	if d := keep - z.bufStart; d > 4096 && d < len(z.buf) {
		n := copy(z.buf, z.buf[d:])
		z.buf = z.buf[:n]
		z.bufStart = keep
	}
}

// endWord judges the word that ended at end (the white space after it
// included), if a keyword is near.
func (z *Stream) endWord(end int, report func(Match, string)) {
	ws := z.wordStart
	z.wordStart = -1
	if z.near < ws || end-ws <= minSecret {
		return
	}
	// The rules woken by a keyword in this word (rules) or within reach
	// before it (earlier), and where the earliest of those keywords
	// begins. A keyword that ended before the word does not wake a rule
	// whose secret always holds a keyword: that secret would be in this
	// word, and so would its keyword. The rules' literal facts hold on
	// ASCII text only (see literalFacts).
	var rules, earlier bits
	kwStart := -1
	for i := max(0, z.nRecent-len(z.recent)); i < z.nRecent; i++ {
		h := z.recent[i%len(z.recent)]
		switch {
		case h.end+z.set.outReach[h.out] < ws:
			continue
		case h.end <= ws:
			earlier.or(&z.set.ac.outs[h.out])
		default:
			rules.or(&z.set.ac.outs[h.out])
		}
		if kwStart < 0 {
			kwStart = h.start
		}
	}
	if kwStart < 0 {
		return
	}
	ascii := isASCII(z.at(max(z.bufStart, kwStart-before), end))
	if ascii {
		rules.orNot(&earlier, &z.set.inSecret)
	} else {
		rules.or(&earlier)
	}
	assign := z.hasAssign(max(z.bufStart, kwStart), end)
	distinct := z.distinct(max(z.bufStart, ws), end)
	z.found = z.found[:0]
	// Specific rules first, then the generic ones, which give way to a
	// specific rule's secret (as gitleaks reports them).
	for _, generic := range []bool{false, true} {
		for w := range rules {
			for m := rules[w]; m != 0; m &= m - 1 {
				i := w*64 + trailingZeros(m)
				r := &z.set.rules[i]
				if r.generic != generic {
					continue
				}
				from := max(z.bufStart, kwStart-r.lookback, end-maxBuf)
				if end-from < r.minLen || end-ws < r.minSecret || r.assign && !assign || distinct < r.minDistinct {
					continue // too short, no operator, or too few bytes for its entropy
				}
				if r.need != nil && ascii && !containsAny(z.at(from, end), r.need) {
					continue // none of the strings every match holds
				}
				var found []int
				if generic {
					found = z.found
				}
				switch {
				case r.atKeyword != nil && ascii:
					z.scratch = z.findAtKeywords(r, ws, end, found, z.scratch[:0])
				case r.anchored != nil:
					z.scratch = z.findAnchored(r, i, kwStart, ws, end, found, z.scratch[:0])
				default:
					z.scratch = r.find(z.set, z.at(from, end), from, found, z.scratch[:0])
				}
				for _, m := range z.scratch {
					if m.End > ws {
						if !generic {
							z.found = append(z.found, m.Start, m.End)
						}
						report(m, z.at(m.Start, m.End))
					}
				}
			}
		}
	}
}

// containsAny reports whether text holds one of set (lower case),
// ignoring ASCII case.
func containsAny(text string, set []string) bool {
	for i := range len(text) {
		if keywordAt(text[i:], set) {
			return true
		}
	}
	return false
}

// findAtKeywords runs rule r, whose every match is its secret and begins
// with one of its keywords (Rule.atKeyword), at each of those keywords in
// the word from ws to end, going on after each match as a search of the
// window would.
func (z *Stream) findAtKeywords(r *Rule, ws, end int, found []int, out []Match) []Match {
	lo := max(z.bufStart, ws-1) // the byte before the word, for \b
	text := z.at(lo, end)
	for p := ws - lo; p < len(text); p++ {
		if !keywordAt(text[p:], r.keywords) {
			continue
		}
		if r.wb && (p > 0 && wordByte[text[p-1]]) == wordByte[text[p]] {
			continue // no word boundary before the keyword
		}
		loc := r.atKeyword.FindStringSubmatchIndex(text[p:])
		if loc == nil {
			continue
		}
		for j := range loc {
			if loc[j] >= 0 {
				loc[j] += p
			}
		}
		out = r.judge(z.set, text, lo, loc, loc[0], found, out)
		p = max(p, loc[1]-1) // the next search starts at the match's end
	}
	return out
}

// wordByte marks the bytes \b counts as word characters.
var wordByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
	}
	return t
}()

// at returns the buffered text from offset s to e.
func (z *Stream) at(s, e int) string {
	t := z.buf[s-z.bufStart : e-z.bufStart]
	return unsafe.String(unsafe.SliceData(t), len(t))
}

// findAnchored runs rule r (index i), whose regex opens with the context
// before its keyword, at each place one of its keywords begins among the
// recent keywords near the word that begins at ws and ends at end (the
// earliest of them begins at kwStart). Its
// regex anchored at the keyword (Rule.anchored) is a short run of the
// backtracking matcher; the full regex over the window would be the NFA
// searching from every byte, three hundred microseconds a KiB on text full
// of keys. The match text an allow-list reads begins where the full
// regex's would: up to contextBack key characters before the keyword.
func (z *Stream) findAnchored(r *Rule, i, kwStart, ws, end int, found []int, out []Match) []Match {
	// The window reaches as far back as a full regex's would (and the
	// buffer always holds it, see trim), whatever the pieces were.
	lo := max(z.bufStart, end-maxBuf, kwStart-before)
	text := z.at(lo, end)
	tried := z.tried[:0]
	z.spans = z.spans[:0]
	matchedFrom, matchedTo := -1, -1
	z.pruneSettled()
	for k := max(0, z.nRecent-len(z.recent)); k < z.nRecent; k++ {
		h := z.recent[k%len(z.recent)]
		if h.end+r.reach < ws || z.set.ac.outs[h.out][i/64]&(1<<(i%64)) == 0 {
			continue
		}
		// The rule's keywords that end where this one does (longest
		// first): one that ends elsewhere has a hit of its own.
	next:
		for _, kw := range r.keywords {
			p := h.end - len(kw)
			if p < max(h.start, lo) || !hasPrefixFold(text[p-lo:], kw) {
				continue
			}
			for _, q := range tried {
				if q == p {
					continue next
				}
			}
			tried = append(tried, p)
			if z.isSettled(p, i) {
				continue
			}
			if p < matchedTo && p > matchedFrom {
				// Inside a match found from an earlier keyword: the
				// whole regex, searching on from that match's end,
				// never starts here.
				z.settled = append(z.settled, p, i)
				continue
			}
			loc := r.anchored.FindStringSubmatchIndex(text[p-lo:])
			if loc == nil {
				continue
			}
			// A keyword that matched is settled: the words after it
			// do not run the rule from it again.
			z.settled = append(z.settled, p, i)
			matchedFrom, matchedTo = p, p+loc[1]
			for j := range loc {
				if loc[j] >= 0 {
					loc[j] += p - lo
				}
			}
			// The secret must end in this word (an earlier word's was
			// judged when it ended), and one found from another keyword
			// of this match is judged once.
			ms := p - lo
			for ms > 0 && p-lo-ms < contextBack && contextByte[text[ms-1]] {
				ms--
			}
			tms, tme := trimNewlines(text, ms, loc[1])
			ss, se := r.secretSpan(loc, tms, tme)
			if ss < 0 || se <= ss || lo+se <= ws || z.judged(lo+ss, lo+se) {
				continue
			}
			out = r.judge(z.set, text, lo, loc, ms, found, out)
		}
	}
	z.tried = tried
	return out
}

// isSettled reports whether rule i matched from the keyword at p, or
// that keyword lies inside a match of it, in an earlier word.
func (z *Stream) isSettled(p, i int) bool {
	for k := 0; k+1 < len(z.settled); k += 2 {
		if z.settled[k] == p && z.settled[k+1] == i {
			return true
		}
	}
	return false
}

// pruneSettled forgets the keywords no longer among the recent ones.
func (z *Stream) pruneSettled() {
	oldest := z.recent[max(0, z.nRecent-len(z.recent))%len(z.recent)].start
	k := 0
	for j := 0; j+1 < len(z.settled); j += 2 {
		if z.settled[j] >= oldest {
			z.settled[k], z.settled[k+1] = z.settled[j], z.settled[j+1]
			k += 2
		}
	}
	z.settled = z.settled[:k]
}

// contextBack is how many bytes of context before its keyword a
// semi-generic rule reads ([\w.-]{0,50}?).
const contextBack = 50

// contextByte marks the bytes of that context.
var contextByte = func() (t [256]bool) {
	for c := 0; c < 256; c++ {
		t[c] = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
	}
	return t
}()

// keywordAt reports whether text begins with one of keywords (lower
// case), ignoring ASCII case. Compared byte by byte: strings.EqualFold,
// which also folds Unicode, made BenchmarkStreamDense 5% slower.
func keywordAt(text string, keywords []string) bool {
	for _, k := range keywords {
		if hasPrefixFold(text, k) {
			return true
		}
	}
	return false
}

// hasPrefixFold reports whether text begins with k (lower case), ignoring
// ASCII case.
func hasPrefixFold(text, k string) bool {
	if len(text) < len(k) {
		return false
	}
	for j := 0; j < len(k); j++ {
		if lowerByte(text[j]) != k[j] {
			return false
		}
	}
	return true
}

// hasAssign reports whether the text from..end holds a byte of an
// assignment operator.
func (z *Stream) hasAssign(from, end int) bool {
	for _, c := range z.buf[from-z.bufStart : end-z.bufStart] {
		switch c {
		case '=', '>', ':', '|', ',':
			return true
		}
	}
	return false
}

// distinct counts the different bytes in the text from..end.
func (z *Stream) distinct(from, end int) int {
	var seen [4]uint64
	n := 0
	for _, c := range z.buf[from-z.bufStart : end-z.bufStart] {
		if seen[c>>6]&(1<<(c&63)) == 0 {
			seen[c>>6] |= 1 << (c & 63)
			n++
		}
	}
	return n
}

// Close judges the last word.
func (z *Stream) Close(report func(Match, string)) {
	if z.wordStart >= 0 {
		z.endWord(z.off, report)
	}
}

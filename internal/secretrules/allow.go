package secretrules

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unsafe"
)

// An allow-list's regexes are many alternatives in few expressions
// (generic-api-key's match list is one expression of some sixty words and
// their contexts), and an alternation that large runs on the NFA, tens of
// microseconds for each candidate key. So each expression is split into
// its top-level alternatives, each compiled alone (small enough for the
// backtracking matcher), and one pass of a keyword automaton over the
// target picks the alternatives worth running: those whose required
// literals (strings every match of the alternative contains) occur in it,
// and those that have none. A list matches when any alternative does,
// which is when the whole expression does. Targets with bytes above
// ASCII skip the filter (case folding maps 'K' and 'ſ' onto ASCII
// letters), as do lists whose alternatives outnumber a rule mask.

// allowRegexes are the compiled alternatives of an allow-list's regexes.
type allowRegexes struct {
	pieces []*regexp.Regexp
	trees  []*syntax.Regexp // the pieces parsed, until build
	// filter finds the pieces whose required literals occur in a
	// target; always are the pieces without any.
	filter   automaton
	always   bits
	filtered bool
}

func (ar *allowRegexes) empty() bool { return len(ar.pieces) == 0 }

// add compiles expr's top-level alternatives.
func (ar *allowRegexes) add(expr string) error {
	if _, err := regexp.Compile(expr); err != nil {
		return err
	}
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return err
	}
	subs := []*syntax.Regexp{re}
	if re.Op == syntax.OpAlternate {
		subs = re.Sub
	}
	for _, sub := range subs {
		p, err := regexp.Compile(sub.String())
		if err != nil {
			return err
		}
		ar.pieces, ar.trees = append(ar.pieces, p), append(ar.trees, sub)
	}
	return nil
}

// build makes the filter once every expression is added.
func (ar *allowRegexes) build(l *literals) {
	if len(ar.pieces) > maxRules {
		return
	}
	var lits []string
	var owners []int
	for i, re := range ar.trees {
		set, ok := l.required(re)
		if !ok {
			ar.always.set(i)
			continue
		}
		for _, l := range set {
			lits = append(lits, l)
			owners = append(owners, i)
		}
	}
	ar.filter = buildAutomaton(lits, owners)
	ar.filtered, ar.trees = true, nil
}

// match reports whether any alternative matches target.
func (ar *allowRegexes) match(target string) bool {
	if !ar.filtered || !isASCII(target) {
		for _, p := range ar.pieces {
			if p.MatchString(target) {
				return true
			}
		}
		return false
	}
	cand := ar.always
	ar.filter.scan(unsafe.Slice(unsafe.StringData(target), len(target)), &cand)
	for w := range cand {
		for m := cand[w]; m != 0; m &= m - 1 {
			if ar.pieces[w*64+trailingZeros(m)].MatchString(target) {
				return true
			}
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// asciiStrings holds every ASCII byte, for one-byte strings that need no
// allocation.
const asciiStrings = "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f" +
	"\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f" +
	" !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\x7f"

// maxExact bounds the strings exact enumerates for one expression.
const maxExact = 256

// literals reads the strings a regex's matches hold; it remembers what
// it read of each node, as required and prefixes read a node's children
// again at every level above them.
type literals struct {
	memo map[*syntax.Regexp]exactResult
}

type exactResult struct {
	set []string
	ok  bool
}

func newLiterals() *literals { return &literals{memo: map[*syntax.Regexp]exactResult{}} }

// exact returns every string re matches (lower case, ASCII), when they
// are few: literals, small classes, optional parts and alternations of
// those.
func (l *literals) exact(re *syntax.Regexp) ([]string, bool) {
	if r, ok := l.memo[re]; ok {
		return r.set, r.ok
	}
	set, ok := l.exactOf(re)
	l.memo[re] = exactResult{set, ok}
	return set, ok
}

func (l *literals) exactOf(re *syntax.Regexp) ([]string, bool) {
	switch re.Op {
	case syntax.OpEmptyMatch:
		return []string{""}, true
	case syntax.OpLiteral:
		var sb strings.Builder
		for _, r := range re.Rune {
			if r >= 0x80 {
				return nil, false
			}
			sb.WriteByte(lowerByte(byte(r)))
		}
		return []string{sb.String()}, true
	case syntax.OpCharClass:
		var seen [128]bool
		n := 0
		for i := 0; i+1 < len(re.Rune); i += 2 {
			lo, hi := re.Rune[i], re.Rune[i+1]
			if hi >= 0x80 && lo < 0x80 {
				hi = 0x7F // the non-ASCII part: a target holding it skips the filter
			}
			if lo >= 0x80 {
				continue
			}
			if hi-lo > 16 {
				return nil, false
			}
			for r := lo; r <= hi; r++ {
				if c := lowerByte(byte(r)); !seen[c] {
					seen[c] = true
					n++
				}
			}
		}
		if n == 0 || n > 32 {
			return nil, false
		}
		set := make([]string, 0, n)
		for c := range seen {
			if seen[c] {
				set = append(set, asciiStrings[c:c+1])
			}
		}
		return set, true
	case syntax.OpCapture:
		return l.exact(re.Sub[0])
	case syntax.OpQuest:
		set, ok := l.exact(re.Sub[0])
		if !ok || contains(set, "") {
			return set, ok
		}
		return append(slices.Clip(set), ""), true // set may be remembered: never append in place
	case syntax.OpAlternate:
		var set []string
		seen := map[string]bool{}
		for _, sub := range re.Sub {
			s, ok := l.exact(sub)
			if !ok || len(set)+len(s) > maxExact {
				return nil, false
			}
			for _, x := range s {
				if !seen[x] {
					seen[x] = true
					set = append(set, x)
				}
			}
		}
		return set, true
	case syntax.OpConcat:
		// The children's sets first: a product past maxExact fails
		// before any string of it is built.
		sets := make([][]string, len(re.Sub))
		n := 1
		for i, sub := range re.Sub {
			s, ok := l.exact(sub)
			if n *= len(s); !ok || n > maxExact {
				return nil, false
			}
			sets[i] = s
		}
		set := []string{""}
		for _, s := range sets {
			set = cross(set, s)
		}
		return set, true
	}
	return nil, false
}

// cross returns every a followed by every b, or nil past maxExact.
func cross(a, b []string) []string { return crossN(a, b, maxExact) }

// maxRun bounds the strings of a run of known children that required
// crosses: a longer run needs ever more of them for one more byte.
const maxRun = 64

// crossN returns every a followed by every b, or nil past n.
func crossN(a, b []string, n int) []string {
	if len(a)*len(b) > n {
		return nil
	}
	out := make([]string, 0, len(a)*len(b))
	seen := make(map[string]bool, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			if s := x + y; !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	return out
}

func contains(set []string, s string) bool {
	for _, x := range set {
		if x == s {
			return true
		}
	}
	return false
}

// shortest is the length of the shortest string in set.
func shortest(set []string) int {
	n := -1
	for _, s := range set {
		if n < 0 || len(s) < n {
			n = len(s)
		}
	}
	return max(n, 0)
}

// required returns strings (lower case, ASCII) one of which every match
// of re contains, or ok false when it cannot tell.
func (l *literals) required(re *syntax.Regexp) (set []string, ok bool) {
	if s, ok := l.exact(re); ok {
		return s, shortest(s) > 0
	}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return l.required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min == 0 {
			return nil, false
		}
		return l.required(re.Sub[0])
	case syntax.OpConcat:
		// The best of: each child's required strings, and each run of
		// children whose strings are all known, crossed.
		best := 0
		try := func(s []string) {
			if n := shortest(s); n > best {
				best, set = n, s
			}
		}
		run := []string{""}
		for _, sub := range re.Sub {
			if s, ok := l.exact(sub); ok {
				if run = crossN(run, s, maxRun); run != nil {
					try(run)
					continue
				}
				run = []string{""}
				if run = crossN(run, s, maxRun); run != nil {
					try(run)
					continue
				}
			}
			// The run goes on into sub's first bytes, when they are
			// known (an alternation that the parser factored, like
			// A(?:KIA|SIA|3T[0-9A-Z])).
			if p := crossN(run, l.prefixes(sub), maxRun); p != nil {
				try(p)
			}
			run = []string{""}
			if s, ok := l.required(sub); ok {
				try(s)
			}
		}
		return set, best > 0
	case syntax.OpAlternate:
		for _, sub := range re.Sub {
			s, ok := l.required(sub)
			if !ok {
				return nil, false
			}
			set = append(set, s...)
		}
		return set, len(set) > 0
	}
	return nil, false
}

// prefixes returns strings (lower case, ASCII) one of which every match
// of re begins with; "" among them when it cannot tell.
func (l *literals) prefixes(re *syntax.Regexp) []string {
	if s, ok := l.exact(re); ok {
		return s
	}
	switch re.Op {
	case syntax.OpCapture, syntax.OpPlus:
		return l.prefixes(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min > 0 {
			return l.prefixes(re.Sub[0])
		}
	case syntax.OpConcat:
		run := []string{""}
		for _, sub := range re.Sub {
			s, ok := l.exact(sub)
			if !ok {
				s = l.prefixes(sub)
			}
			next := cross(run, s)
			if next == nil {
				return run
			}
			run = next
			if !ok {
				return run
			}
		}
		return run
	case syntax.OpAlternate:
		var set []string
		for _, sub := range re.Sub {
			for _, x := range l.prefixes(sub) {
				if len(set) >= maxExact {
					return []string{""}
				}
				if !contains(set, x) {
					set = append(set, x)
				}
			}
		}
		return set
	}
	return []string{""}
}

package regex

import (
	"bytes"
	"regexp/syntax"
	"unicode/utf8"
)

// A prefilter is a set of literals at least one of which every match of
// a rule contains. When a segment contains none of them the regexp cannot
// match there and is not run: most chunks of ordinary prose contain no
// "@", "://" or "as an ai language model", and Go's regexp costs far
// more per call than a substring search.
type prefilter struct {
	lits   [][]byte // lower-cased when fold
	fold   bool     // ASCII case-insensitive search
	maxLen int      // longest literal
}

// preState is one validator's progress through the text for one rule's
// prefilter, so each byte is searched about once rather than once per
// chunk while it stays in the window.
type preState struct {
	litAt      int // start of the last literal found (-1: none)
	searchFrom int // no literal starts in [.., searchFrom) except at litAt
}

// maxLits bounds the literal set (alternations of many words).
const maxLits = 16

// newPrefilter returns the prefilter for a parsed, simplified pattern, or
// nil when no useful literal set exists.
func newPrefilter(re *syntax.Regexp) *prefilter {
	lits, fold, ok := required(re)
	if !ok || len(lits) == 0 {
		return nil
	}
	p := &prefilter{fold: fold}
	for _, l := range lits {
		if l == "" {
			return nil
		}
		b := []byte(l)
		if fold {
			b = bytes.ToLower(b)
		}
		p.lits = append(p.lits, b)
		p.maxLen = max(p.maxLen, len(b))
	}
	return p
}

// mayMatchAt reports whether text[segStart:] (text starting at absolute
// offset base) may hold a match, searching only bytes not searched before.
func (p *prefilter) mayMatchAt(st *preState, text []byte, base, segStart int) bool {
	if p == nil || st.litAt >= segStart {
		return true
	}
	s := max(segStart, st.searchFrom)
	end := base + len(text)
	if k := p.index(text[s-base:]); k >= 0 {
		st.litAt = s + k
		st.searchFrom = s + k + 1
		return true
	}
	st.searchFrom = max(s, end-(p.maxLen-1))
	return false
}

// index returns the offset of the first literal in b, or -1. Under case
// folding, a non-ASCII byte counts as a literal at its position (Unicode
// folds such as the Kelvin sign for k are not searched for).
func (p *prefilter) index(b []byte) int {
	first := -1
	if p.fold {
		for i, c := range b {
			if c >= utf8.RuneSelf {
				first = i
				b = b[:i]
				break
			}
		}
	}
	for _, l := range p.lits {
		var k int
		if p.fold {
			k = indexFold(b, l)
		} else {
			k = bytes.Index(b, l)
		}
		if k >= 0 && (first < 0 || k < first) {
			first = k
			b = b[:k+len(l)-1+1]
		}
	}
	return first
}

// required returns literals one of which every match contains, and
// whether any of them is case-insensitive.
func required(re *syntax.Regexp) ([]string, bool, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r >= utf8.RuneSelf {
				return nil, false, false
			}
		}
		return []string{string(re.Rune)}, re.Flags&syntax.FoldCase != 0, true
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		// The sub-pattern with the longest shortest literal is the most
		// selective requirement.
		var best []string
		bestFold, found, bestLen := false, false, 0
		for _, sub := range re.Sub {
			l, f, ok := required(sub)
			if !ok {
				continue
			}
			short := len(l[0])
			for _, s := range l {
				short = min(short, len(s))
			}
			if !found || short > bestLen {
				best, bestFold, found, bestLen = l, f, true, short
			}
		}
		return best, bestFold, found
	case syntax.OpAlternate:
		var all []string
		fold := false
		for _, sub := range re.Sub {
			l, f, ok := required(sub)
			if !ok {
				return nil, false, false
			}
			all = append(all, l...)
			fold = fold || f
		}
		if len(all) > maxLits {
			return nil, false, false
		}
		return all, fold, true
	}
	return nil, false, false
}

// indexFold finds lower-case ASCII needle in haystack ignoring ASCII case.
func indexFold(h, needle []byte) int {
	n := len(needle)
	if n == 0 {
		return 0
	}
	first := needle[0]
	upper := first
	if first >= 'a' && first <= 'z' {
		upper = first - 32
	}
	for i := 0; i+n <= len(h); i++ {
		c := h[i]
		if c != first && c != upper {
			continue
		}
		j := 1
		for ; j < n; j++ {
			c := h[i+j]
			if c >= 'A' && c <= 'Z' {
				c += 32
			}
			if c != needle[j] {
				break
			}
		}
		if j == n {
			return i
		}
	}
	return -1
}

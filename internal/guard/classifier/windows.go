package classifier

import (
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/guard/textnorm"
)

// wordSums are one head's weight sums per word of a text, accumulated
// while its features are hashed, without storing the features: what
// windowScores needs, in one pass over the normalised text. Per word,
// ws and cs are the sums of the word-group and character-group weights,
// wc and cc their counts; sw, sc, nw and nc the same over the whole text.
type wordSums struct {
	norm           []byte
	ws, wc, cs, cc []float32
	sw, sc         int32
	nw, nc         int
}

var sumsPool = sync.Pool{New: func() any { return new(wordSums) }}

// accumulate fills s with the per-word sums of weights w over the
// features of the normalised text t: the same features, assigned to the
// same words, as features.extract (TestWordSumsMatchFeatures and
// FuzzWordSums compare the two), so every window scores the same.
func (s *wordSums) accumulate(t []byte, w []int8, bits uint8, opt featOpts) {
	mask := uint32(1)<<bits - 1
	s.ws, s.wc, s.cs, s.cc = s.ws[:0], s.wc[:0], s.cs[:0], s.cc[:0]
	s.sw, s.sc, s.nw, s.nc = 0, 0, 0, 0
	word := -1
	var h, prev, prev2 uint64
	inWord, atStart, wordAtStart := false, true, false
	addWord := func(ix uint32) {
		v := w[ix&mask]
		s.ws[word] += float32(v)
		s.wc[word]++
		s.sw += int32(v)
		s.nw++
	}
	flush := func() {
		if !inWord {
			return
		}
		wh := mix(h ^ nsWord)
		addWord(uint32(wh))
		if wordAtStart {
			addWord(uint32(mix(wh ^ nsStart)))
		}
		if word > 0 {
			addWord(uint32(mix(prev*31 ^ wh ^ nsBigram)))
		}
		if opt.skips && word > 1 {
			addWord(uint32(mix(prev2*37 ^ wh ^ nsSkip)))
		}
		prev, prev2 = wh, prev
		inWord = false
	}
	// last holds the latest alphanumeric runes (last[5] the newest), n how
	// many there have been: the character n-grams run across words.
	var last [6]uint64
	n := 0
	seeds := [3]uint64{uint64(nsChar) + 4, uint64(nsChar) + 5, uint64(nsChar) + 6}
	for i := 0; i < len(t); {
		r, alnum := rune(t[i]), false
		if r < utf8.RuneSelf {
			alnum = asciiAlnum[r]
			i++
		} else {
			var size int
			r, size = utf8.DecodeRune(t[i:])
			alnum = unicode.IsLetter(r) || unicode.IsDigit(r)
			i += size
		}
		if !alnum {
			flush()
			switch r {
			case '.', '!', '?', ':', '\n':
				atStart = true
			}
			continue
		}
		if !inWord {
			word++
			inWord = true
			wordAtStart, atStart = opt.starts && atStart, false
			h = 14695981039346656037
			s.ws, s.wc, s.cs, s.cc = append(s.ws, 0), append(s.wc, 0), append(s.cs, 0), append(s.cc, 0)
		}
		h = (h ^ uint64(r)) * fnvPrime
		copy(last[:5], last[1:])
		last[5] = uint64(r)
		n++
		var cv int32
		var cn float32
		if n >= 4 {
			g := seeds[0]
			g = (g ^ last[2]) * fnvPrime
			g = (g ^ last[3]) * fnvPrime
			g = (g ^ last[4]) * fnvPrime
			g = (g ^ last[5]) * fnvPrime
			cv += int32(w[uint32(mix(g))&mask])
			cn++
		}
		if n >= 5 {
			g := seeds[1]
			g = (g ^ last[1]) * fnvPrime
			g = (g ^ last[2]) * fnvPrime
			g = (g ^ last[3]) * fnvPrime
			g = (g ^ last[4]) * fnvPrime
			g = (g ^ last[5]) * fnvPrime
			cv += int32(w[uint32(mix(g))&mask])
			cn++
		}
		if n >= 6 {
			g := seeds[2]
			g = (g ^ last[0]) * fnvPrime
			g = (g ^ last[1]) * fnvPrime
			g = (g ^ last[2]) * fnvPrime
			g = (g ^ last[3]) * fnvPrime
			g = (g ^ last[4]) * fnvPrime
			g = (g ^ last[5]) * fnvPrime
			cv += int32(w[uint32(mix(g))&mask])
			cn++
		}
		s.cs[word] += float32(cv)
		s.cc[word] += cn
		s.sc += cv
		s.nc += int(cn)
	}
	flush()
}

// windowsOf calls each with the raw score of every window of s, as
// Head.windows does over features: prefix sums per word, then one score
// per window of window words every stride words.
func (h *Head) windowsOf(s *wordSums, window, stride int, each func(float32)) {
	nWords := len(s.ws)
	ws, wc, cs, cc := s.ws, s.wc, s.cs, s.cc
	// Prefix sums in place, shifted by one: p[i] is the sum over words
	// before i (the index-0 slot of Head.windows is the zero before).
	prefix := func(a []float32) {
		for i := 1; i < len(a); i++ {
			a[i] += a[i-1]
		}
	}
	prefix(ws)
	prefix(wc)
	prefix(cs)
	prefix(cc)
	at := func(a []float32, i int) float32 {
		if i == 0 {
			return 0
		}
		return a[i-1]
	}
	for a := 0; a < nWords; a += stride {
		b := min(a+window, nWords)
		v := h.Bias + h.Scale*(norm(at(ws, b)-at(ws, a), int(at(wc, b)-at(wc, a)), h.prior)+norm(at(cs, b)-at(cs, a), int(at(cc, b)-at(cc, a)), h.prior))
		each(v)
		if b == nWords {
			break
		}
	}
}

// wholeOf is Head.rawWhole over the sums of a whole text.
func (h *Head) wholeOf(s *wordSums) float32 {
	return h.Bias + h.Scale*(norm(float32(s.sw), s.nw, h.prior)+norm(float32(s.sc), s.nc, h.prior))
}

func (m *Model) windowScores(text string, h *Head, depth int, each func(float32)) {
	s := sumsPool.Get().(*wordSums)
	s.norm = textnorm.AppendNormalize(s.norm[:0], text)
	s.accumulate(s.norm, h.W, m.Bits, m.Meta.featOpts())
	if n := len(s.ws); n > 0 {
		if m.Window <= 0 || n <= m.Window {
			each(h.wholeOf(s))
		} else {
			h.windowsOf(s, m.Window, m.Stride, each)
		}
	}
	sumsPool.Put(s)
	if depth < maxDepth {
		for _, p := range textnorm.Payloads(text) {
			m.windowScores(p, h, depth+1, each)
		}
	}
}

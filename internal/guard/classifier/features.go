package classifier

import (
	"sync"
	"unicode"

	"github.com/aegis-sentinel/aegis/internal/guard/textnorm"
)

// Feature namespaces, mixed into the hash so that a word and a character
// n-gram with the same runes land in different buckets.
const (
	nsWord   = 0x9e3779b97f4a7c15
	nsBigram = 0xc2b2ae3d27d4eb4f
	nsChar   = 0x165667b19e3779f9
	nsStart  = 0x27d4eb2f165667c5
	nsSkip   = 0x85ebca77c2b2ae63
)

// featOpts are the optional feature groups a model was trained with
// (recorded in its Meta, so that it is scored with the same ones).
type featOpts struct {
	// starts adds the first word of every sentence or line.
	starts bool
	// skips adds word pairs with one word between them ("ignore all
	// instructions" and "ignore the instructions" share ignore_instructions).
	skips bool
}

// charNs are the character n-gram sizes, on the alphanumeric stream with
// spaces and punctuation removed (so "i.g.n.o.r.e" and "ig nore" give the
// same grams as "ignore"). 4 to 6 was chosen by leaving training sources
// out (mean recall at 1% FPR over two seeds: 3-5 0.555, 4-5 0.605, 4-6
// 0.615, 5-6 0.619); changing it needs a new model version.
var charNs = [...]int{4, 5, 6}

// features holds the hashed features of one text: word unigrams and
// bigrams first, then character n-grams. pos is the word index each
// feature belongs to, so windows can be scored with prefix sums.
type features struct {
	idx    []uint32
	pos    []int32
	nWord  int // features [0, nWord) are word features
	nWords int // number of words
	runes  []rune
	wpos   []int32 // word index of each alnum rune
}

var featPool = sync.Pool{New: func() any { return new(features) }}

func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// extract fills f with the features of the already normalised text s,
// hashed into 2^bits buckets. With starts, the word group also holds the
// first word of every sentence or line, so that an imperative aimed at
// the reader ("Ignore ...", "Print ...") differs from the same verb inside
// a sentence. With skips, it also holds every pair of words with one word
// between them, so that "ignore all instructions" and "ignore the
// instructions" share a feature. (Runs of punctuation as features, for role and delimiter
// tokens, were measured too and left out: leave-sources-out recall fell
// on the system-prompt-extraction fold, whose negatives include code.)
func (f *features) extract(s string, bits uint8, opt featOpts) {
	mask := uint32(1)<<bits - 1
	f.idx, f.pos, f.runes, f.wpos = f.idx[:0], f.pos[:0], f.runes[:0], f.wpos[:0]
	word := -1
	var h, prev, prev2 uint64
	inWord, atStart, wordAtStart := false, true, false
	flush := func() {
		if !inWord {
			return
		}
		wh := mix(h ^ nsWord)
		f.idx = append(f.idx, uint32(wh)&mask)
		f.pos = append(f.pos, int32(word))
		if wordAtStart {
			f.idx = append(f.idx, uint32(mix(wh^nsStart))&mask)
			f.pos = append(f.pos, int32(word))
		}
		if word > 0 {
			f.idx = append(f.idx, uint32(mix(prev*31^wh^nsBigram))&mask)
			f.pos = append(f.pos, int32(word))
		}
		if opt.skips && word > 1 {
			f.idx = append(f.idx, uint32(mix(prev2*37^wh^nsSkip))&mask)
			f.pos = append(f.pos, int32(word))
		}
		prev, prev2 = wh, prev
		inWord = false
	}
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if !inWord {
				word++
				inWord = true
				wordAtStart, atStart = opt.starts && atStart, false
				h = 14695981039346656037
			}
			h = (h ^ uint64(r)) * 1099511628211
			f.runes = append(f.runes, r)
			f.wpos = append(f.wpos, int32(word))
			continue
		}
		flush()
		switch r {
		case '.', '!', '?', ':', '\n':
			atStart = true
		}
	}
	flush()
	f.nWord = len(f.idx)
	f.nWords = word + 1
	rs := f.runes
	for _, n := range charNs {
		for j := n - 1; j < len(rs); j++ {
			g := uint64(nsChar) + uint64(n)
			for k := j - n + 1; k <= j; k++ {
				g = (g ^ uint64(rs[k])) * 1099511628211
			}
			f.idx = append(f.idx, uint32(mix(g))&mask)
			f.pos = append(f.pos, f.wpos[j])
		}
	}
}

// textFeatures normalises text and extracts its features into a pooled
// value that the caller returns with featPool.Put.
func textFeatures(text string, bits uint8, opt featOpts) *features {
	f := featPool.Get().(*features)
	f.extract(textnorm.Normalize(text), bits, opt)
	return f
}

package classifier

import (
	"slices"
	"sync"
	"unicode"
	"unicode/utf8"

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
	norm   []byte  // the normalised text
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
	f.extractBytes([]byte(s), bits, opt)
}

// extractBytes is extract on the bytes of the normalised text.
func (f *features) extractBytes(s []byte, bits uint8, opt featOpts) {
	mask := uint32(1)<<bits - 1
	// At most one word per two bytes, four word features per word, one
	// rune per byte and three character n-grams per rune: size the
	// buffers once rather than growing them feature by feature.
	need := 4*(len(s)+1)/2 + 3*len(s)
	f.idx, f.pos = slices.Grow(f.idx[:0], need), slices.Grow(f.pos[:0], need)
	f.runes, f.wpos = slices.Grow(f.runes[:0], len(s)), slices.Grow(f.wpos[:0], len(s))
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
	for i := 0; i < len(s); {
		r, alnum := rune(s[i]), false
		if r < utf8.RuneSelf {
			alnum = asciiAlnum[r]
			i++
		} else {
			var n int
			r, n = utf8.DecodeRune(s[i:])
			alnum = unicode.IsLetter(r) || unicode.IsDigit(r)
			i += n
		}
		if alnum {
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
	f.charGrams(mask)
}

// fnvPrime is the 64-bit FNV-1a prime the n-gram hashes use.
const fnvPrime = 1099511628211

// charGrams appends the character n-grams of f.runes (sizes charNs, in
// that order), each hashed FNV-1a style from nsChar+n.
func (f *features) charGrams(mask uint32) {
	rs, wp := f.runes, f.wpos
	for _, n := range charNs {
		seed := uint64(nsChar) + uint64(n)
		for j := n - 1; j < len(rs); j++ {
			g := seed
			switch n { // unrolled for the sizes in use
			case 4:
				g = (g ^ uint64(rs[j-3])) * fnvPrime
				g = (g ^ uint64(rs[j-2])) * fnvPrime
				g = (g ^ uint64(rs[j-1])) * fnvPrime
				g = (g ^ uint64(rs[j])) * fnvPrime
			case 5:
				g = (g ^ uint64(rs[j-4])) * fnvPrime
				g = (g ^ uint64(rs[j-3])) * fnvPrime
				g = (g ^ uint64(rs[j-2])) * fnvPrime
				g = (g ^ uint64(rs[j-1])) * fnvPrime
				g = (g ^ uint64(rs[j])) * fnvPrime
			default:
				for k := j - n + 1; k <= j; k++ {
					g = (g ^ uint64(rs[k])) * fnvPrime
				}
			}
			f.idx = append(f.idx, uint32(mix(g))&mask)
			f.pos = append(f.pos, wp[j])
		}
	}
}

// asciiAlnum marks the ASCII letters and digits (unicode.IsLetter or
// IsDigit below U+0080).
var asciiAlnum = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	return t
}()

// textFeatures normalises text and extracts its features into a pooled
// value that the caller returns with featPool.Put.
func textFeatures(text string, bits uint8, opt featOpts) *features {
	f := featPool.Get().(*features)
	f.norm = textnorm.AppendNormalize(f.norm[:0], text)
	f.extractBytes(f.norm, bits, opt)
	return f
}

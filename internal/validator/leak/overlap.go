package leak

import (
	"sync"
	"sync/atomic"
)

// overlap finds the system prompt in the output by word shingles.
//
// Words are runs of ASCII letters and digits and of non-ASCII bytes,
// ASCII-lower-cased; everything else (punctuation, markdown, white space)
// only separates words, so reformatting does not hide a copy. Every run of
// k consecutive words (a shingle) of the system prompt is hashed into a
// set, except shingles made mostly of stop words ("you are a helpful
// assistant and you will"), which any answer may contain. While the output
// streams, each new word completes an output shingle; shingles found in
// the set cover their k words, and covered words chain into a run as long
// as no more than maxGap words in a row are uncovered, so a changed,
// added or dropped word does not break a copy. A run that covers need
// words is a leak.
type overlap struct {
	k, need, maxGap int
	set             map[uint64]struct{}

	words  []uint64 // ring of the last k word hashes
	starts []int    // ring of their start offsets
	n      int      // words read
	// sh is the hash of the last k words, rolled one word at a time
	// (bpow is shingleB^(k-1), the weight of the word that leaves).
	sh   uint64
	bpow uint64

	inWord    bool
	hash      uint64
	wordStart int

	// What may still begin a copy (see hold): pre is a bitset of the hash
	// of every prefix, in bytes, of every word that begins a shingle, and
	// of every shingle's first 1..k-1 words; wordOut is set once the word
	// being read is no prefix of such a word; alive marks, by ring slot,
	// the recent words from which the words read since are the opening
	// words of some shingle, seq their running hashes.
	pre     []uint64
	preBits uint
	// full is a bitset of the set's shingle hashes (same size as pre):
	// most output shingles miss it, sparing the map lookup.
	full    []uint64
	wordOut bool
	alive   uint32
	seq     []uint64

	runActive   bool
	runStart    int // offset of the first covered word
	lastCovered int // index of the last covered word
	covered     int
}

// minNeed is the fewest copied words that count as a leak, whatever the
// length of the system prompt.
const minNeed = 12

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
	shingleB  = 0x9E3779B97F4A7C15
)

func isWordByteOverlap(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// foldHash adds byte c, case-folded, to the FNV-1a hash h of a word: the
// one hash the prompt's words and the streamed words are both given.
func foldHash(h uint64, c byte) uint64 {
	if c >= 'A' && c <= 'Z' {
		c += 'a' - 'A'
	}
	return (h ^ uint64(c)) * fnvPrime
}

// wordHashes splits s as the stream is split and returns the word hashes.
func wordHashes(s string) []uint64 {
	hs, _ := wordSpans(s)
	return hs
}

// wordSpans returns the word hashes of s and each word's start offset.
func wordSpans(s string) (hashes []uint64, starts []int) {
	in := false
	h := uint64(0)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isWordByteOverlap(c) {
			if !in {
				in, h = true, fnvOffset
				starts = append(starts, i)
			}
			h = foldHash(h, c)
		} else if in {
			in = false
			hashes = append(hashes, h)
		}
	}
	if in {
		hashes = append(hashes, h)
	}
	return hashes, starts
}

// prefixesOfWord calls add with the hash of every prefix of the word that
// starts at s[from], as write computes them while the word streams.
func prefixesOfWord(s string, from int, add func(uint64)) {
	h := uint64(fnvOffset)
	for i := from; i < len(s) && isWordByteOverlap(s[i]); i++ {
		h = foldHash(h, s[i])
		add(h)
	}
}

const preMix = 0x9E3779B97F4A7C15

func (o *overlap) addPre(h uint64) {
	k := (h * preMix) >> (64 - o.preBits)
	o.pre[k/64] |= 1 << (k % 64)
}

// mayBegin reports whether h may be in the set of beginnings (false
// positives only hold more text back).
func (o *overlap) mayBegin(h uint64) bool {
	k := (h * preMix) >> (64 - o.preBits)
	return o.pre[k/64]&(1<<(k%64)) != 0
}

func shingleHash(ws []uint64) uint64 {
	h := uint64(0)
	for _, w := range ws {
		h = h*shingleB + w
	}
	return h
}

var stopHashes = func() map[uint64]bool {
	m := map[uint64]bool{}
	for _, w := range wordHashes(`a an the and or but if of to in on at by for with from as is are was were be been
		being am do does did have has had will would shall should can could may might must you your yours i me my we
		us our they them their it its this that these those he she his her not no yes so than then there here what
		which who whom when where why how all any each some such only own same too very just also please always never
		assistant helpful user answer question questions respond response reply help`) {
		m[w] = true
	}
	return m
}()

// newOverlap prepares the shingle set of the system prompt. It returns
// nil when the prompt is too short to judge.
func newOverlap(system string, k, minWords, minLeak int, frac float64, maxGap int) *overlap {
	ws, wstart := wordSpans(system)
	if len(ws) < minWords || len(ws) < k {
		return nil
	}
	o := &overlap{k: k, maxGap: maxGap, set: make(map[uint64]struct{}, len(ws))}
	var firsts []int // the words that begin a shingle of the set
	for i := 0; i+k <= len(ws); i++ {
		stop := 0
		for _, w := range ws[i : i+k] {
			if stopHashes[w] {
				stop++
			}
		}
		if stop > k*3/4 {
			continue // mostly stop words: any answer may say it
		}
		o.set[shingleHash(ws[i:i+k])] = struct{}{}
		firsts = append(firsts, i)
	}
	if len(o.set) == 0 {
		return nil
	}
	// The beginnings a copy can start with, about 16 bits per entry.
	o.preBits = 10
	for 1<<o.preBits < 16*len(firsts)*(k+8) {
		o.preBits++
	}
	o.pre = make([]uint64, 1<<o.preBits/64)
	o.full = make([]uint64, 1<<o.preBits/64)
	for sh := range o.set {
		k := (sh * preMix) >> (64 - o.preBits)
		o.full[k/64] |= 1 << (k % 64)
	}
	for _, i := range firsts {
		prefixesOfWord(system, wstart[i], o.addPre)
		h := uint64(0)
		for _, w := range ws[i : i+k-1] {
			h = h*shingleB + w
			o.addPre(h)
		}
	}
	o.seq = make([]uint64, k)
	need := int(frac*float64(len(ws)) + 0.999)
	o.need = max(minNeed, k+2, min(minLeak, need))
	o.words = make([]uint64, k)
	o.starts = make([]int, k)
	o.bpow = 1
	for range k - 1 {
		o.bpow *= shingleB
	}
	return o
}

// overlapKey is what an overlap's tables depend on.
type overlapKey struct {
	system                    string
	k, minWords, minLeak, gap int
	frac                      float64
}

// overlapCache keeps each system prompt's shingle set and prefix bitset,
// which never change once built: every attempt, and every tool call, of a
// conversation reads the same system prompt.
var (
	overlapCache  sync.Map // overlapKey -> *overlap (nil: the prompt is not judged)
	overlapCached atomic.Int64
)

const overlapCacheMax = 256

// cachedOverlap is newOverlap with its tables shared: the result has its
// own reading state over tables built once per system prompt.
func cachedOverlap(system string, k, minWords, minLeak int, frac float64, maxGap int) *overlap {
	key := overlapKey{system, k, minWords, minLeak, maxGap, frac}
	var t *overlap
	if v, ok := overlapCache.Load(key); ok {
		t = v.(*overlap)
	} else {
		t = newOverlap(system, k, minWords, minLeak, frac, maxGap)
		if overlapCached.Add(1) <= overlapCacheMax {
			overlapCache.Store(key, t) // the template is never read from
		}
	}
	if t == nil {
		return nil
	}
	return &overlap{k: t.k, need: t.need, maxGap: t.maxGap, bpow: t.bpow, set: t.set, pre: t.pre, preBits: t.preBits, full: t.full,
		words: make([]uint64, t.k), starts: make([]int, t.k), seq: make([]uint64, t.k)}
}

// write feeds p, whose first byte is at offset at, and stops at the
// first leak found.
func (o *overlap) write(p []byte, at int) (found bool, start, end int) {
	for i, c := range p {
		if isWordByteOverlap(c) {
			if !o.inWord {
				o.inWord, o.hash, o.wordStart, o.wordOut = true, fnvOffset, at+i, false
			}
			o.hash = foldHash(o.hash, c)
			if !o.wordOut && !o.mayBegin(o.hash) {
				o.wordOut = true
			}
			continue
		}
		if !o.inWord {
			continue
		}
		o.inWord = false
		if ok, s, e := o.word(o.hash, o.wordStart, at+i); ok {
			return true, s, e
		}
	}
	return false, 0, 0
}

// flush ends the last word.
func (o *overlap) flush(end int) (bool, int, int) {
	if !o.inWord {
		return false, 0, 0
	}
	o.inWord = false
	return o.word(o.hash, o.wordStart, end)
}

func (o *overlap) word(h uint64, start, end int) (bool, int, int) {
	i := o.n
	// Roll the shingle hash: the word k back leaves (a zero slot before k
	// words were read), h joins.
	slot := i % o.k
	o.sh = (o.sh-o.words[slot]*o.bpow)*shingleB + h
	o.words[slot] = h
	o.starts[slot] = start
	o.n++
	// The recent words from which the text is still the opening of a
	// shingle stay alive; a sequence of k words is judged below. Most
	// words follow none (alive is empty).
	for j := max(0, i-o.k+1); o.alive != 0 && j < i; j++ {
		s := uint32(j % o.k)
		if o.alive&(1<<s) == 0 {
			continue
		}
		o.seq[s] = o.seq[s]*shingleB + h
		if i-j+1 >= o.k || !o.mayBegin(o.seq[s]) {
			o.alive &^= 1 << s
		}
	}
	s := uint32(slot)
	o.seq[s] = h
	// A word whose letters were already cleared (wordOut) cannot begin a
	// copy: a collision in the bitset must not take that back.
	if !o.wordOut && o.mayBegin(h) {
		o.alive |= 1 << s
	} else {
		o.alive &^= 1 << s
	}
	if o.runActive && i-o.lastCovered > o.maxGap+o.k {
		o.runActive = false // no later shingle can join this run
	}
	if o.n < o.k {
		return false, 0, 0
	}
	sh := o.sh
	if b := (sh * preMix) >> (64 - o.preBits); o.full[b/64]&(1<<(b%64)) == 0 {
		return false, 0, 0
	}
	if _, ok := o.set[sh]; !ok {
		return false, 0, 0
	}
	first := i - o.k + 1
	switch {
	case !o.runActive || first-o.lastCovered-1 > o.maxGap:
		o.runActive, o.runStart, o.covered = true, o.starts[first%o.k], o.k
	case first <= o.lastCovered:
		o.covered += i - o.lastCovered
	default:
		o.covered += o.k
	}
	o.lastCovered = i
	if o.covered >= o.need {
		return true, o.runStart, end
	}
	return false, 0, 0
}

// hold returns the earliest offset a leak could still start at: the run
// under way; the first of the last k-1 words from which the words read
// since open some shingle of the system prompt (a copy may start there);
// the word being read while its letters so far begin a word that opens a
// shingle. Text that cannot start a copy flows: "Sure, here" waits only
// if the system prompt has a shingle beginning "sure here".
func (o *overlap) hold(end int) int {
	h := end
	if o.inWord && !o.wordOut {
		h = o.wordStart
	}
	if o.runActive {
		h = min(h, o.runStart)
	}
	for j := max(0, o.n-(o.k-1)); j < o.n; j++ {
		if o.alive&(1<<uint32(j%o.k)) != 0 {
			h = min(h, o.starts[j%o.k])
			break
		}
	}
	return h
}

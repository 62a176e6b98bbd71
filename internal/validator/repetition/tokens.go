package repetition

import (
	"unicode"
	"unicode/utf8"
)

// tokenizer splits a byte stream into tokens and hashes them, one rune at
// a time, so that its output does not depend on where the stream is cut.
//
// A token is a word (a run of letters, digits and '_'; letters are
// case-folded) or a symbol (any other non-space rune; a run of the same
// symbol is one token per maxSymbolRun runes, so "----" is one token and a
// 400-dash line is a hundred). A newline is a symbol, so line structure
// takes part in periods; other white space only separates tokens.
//
// Hashes are FNV-1a over the folded runes. Bit 0 of a token hash says
// whether the token is a word, so a period can tell words from symbols
// without another array.
type tokenizer struct {
	carry  [utf8.UTFMax]byte // an incomplete UTF-8 sequence cut by a chunk boundary
	ncarry int
	off    int // offset of the next byte to read (carried bytes included)

	kind     uint8 // tokNone, tokWord, tokSymbol: the token being read
	start    int   // offset of the token being read
	hash     uint64
	sym      rune // for tokSymbol: the repeated rune
	symCount int

	// prefixes is a bitset of the hashes of every prefix of every token
	// read so far (of the token being read too), keyed with the kind; nil
	// turns the tracking off. novel is set once the token being read has a
	// prefix that no earlier token had: it cannot equal any earlier token
	// then, however it goes on.
	prefixes []uint64
	novel    bool
}

const (
	tokNone = iota
	tokWord
	tokSymbol

	maxSymbolRun = 4
	fnvOffset    = 14695981039346656037
	fnvPrime     = 1099511628211

	prefixBits = 16 // 64 Ki bits of prefix hashes (8 KiB)
	prefixMix  = 0x9E3779B97F4A7C15
)

// wordByte maps the ASCII bytes of words to their folded form (0: not a
// word byte).
var wordByte = func() (t [utf8.RuneSelf]byte) {
	for c := byte('a'); c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = c, c
	}
	for c := byte('0'); c <= '9'; c++ {
		t[c] = c
	}
	t['_'] = '_'
	return t
}()

// emitFunc receives each complete token: its hash and byte range.
type emitFunc func(h uint64, start, end int)

// write reads p and calls emit for every token that p completes.
func (t *tokenizer) write(p []byte, emit emitFunc) {
	for t.ncarry > 0 {
		// A rune was cut by the previous chunk boundary: decode it from
		// the carried bytes and the front of p.
		var tmp [2 * utf8.UTFMax]byte
		n := copy(tmp[:], t.carry[:t.ncarry])
		n += copy(tmp[n:utf8.UTFMax], p)
		if !utf8.FullRune(tmp[:n]) {
			t.ncarry = copy(t.carry[:], tmp[:n])
			t.off += len(p) // all of p is in the carry now
			return
		}
		r, size := utf8.DecodeRune(tmp[:n])
		at := t.off - t.ncarry
		t.rune(r, at, emit)
		if size <= t.ncarry {
			// Invalid sequence inside the carried bytes: drop what was
			// decoded and try again with the rest.
			copy(t.carry[:], t.carry[size:t.ncarry])
			t.ncarry -= size
			continue
		}
		fromP := size - t.ncarry
		t.ncarry = 0
		t.off += fromP
		p = p[fromP:]
	}
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			if f := wordByte[c]; f != 0 && t.kind == tokWord {
				// The common byte: one more of a word's ASCII letters,
				// what wordRune does for it without the calls.
				t.hash = (t.hash ^ uint64(f)) * fnvPrime
				if t.prefixes != nil {
					t.notePrefix()
				}
				t.off++
				i++
				continue
			}
			t.ascii(c, t.off, emit)
			t.off++
			i++
			continue
		}
		if !utf8.FullRune(p[i:]) {
			t.ncarry = copy(t.carry[:], p[i:])
			t.off += t.ncarry
			return
		}
		r, size := utf8.DecodeRune(p[i:])
		t.rune(r, t.off, emit)
		t.off += size
		i += size
	}
}

// flush ends the stream: an incomplete rune counts as one symbol and the
// token being read is emitted.
func (t *tokenizer) flush(emit emitFunc) {
	if t.ncarry > 0 {
		startOff := t.off - t.ncarry
		t.rune(utf8.RuneError, startOff, emit)
		t.ncarry = 0
	}
	t.end(t.off, emit)
}

func (t *tokenizer) end(at int, emit emitFunc) {
	if t.kind == tokNone {
		return
	}
	h := t.hash
	if t.kind == tokWord {
		h |= 1
	} else {
		h &^= 1
	}
	t.kind = tokNone
	emit(h, t.start, at)
}

func (t *tokenizer) ascii(c byte, at int, emit emitFunc) {
	switch {
	case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '_':
		t.wordRune(rune(c), at, emit)
	case c >= 'A' && c <= 'Z':
		t.wordRune(rune(c+'a'-'A'), at, emit)
	case c == ' ', c == '\t', c == '\r', c == '\f', c == '\v':
		t.end(at, emit)
	default:
		t.symbolRune(rune(c), at, emit)
	}
}

func (t *tokenizer) rune(r rune, at int, emit emitFunc) {
	switch {
	case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
		t.wordRune(unicode.ToLower(r), at, emit)
	case unicode.IsSpace(r):
		t.end(at, emit)
	default:
		t.symbolRune(r, at, emit)
	}
}

func (t *tokenizer) wordRune(r rune, at int, emit emitFunc) {
	if t.kind != tokWord {
		t.end(at, emit)
		t.kind, t.start, t.hash, t.novel = tokWord, at, fnvOffset, false
	}
	t.mix(r)
}

func (t *tokenizer) symbolRune(r rune, at int, emit emitFunc) {
	if t.kind == tokSymbol && t.sym == r && t.symCount < maxSymbolRun {
		t.symCount++
		t.mix(r)
		return
	}
	t.end(at, emit)
	t.kind, t.start, t.hash, t.sym, t.symCount, t.novel = tokSymbol, at, fnvOffset, r, 1, false
	t.mix(r)
}

func (t *tokenizer) mix(r rune) {
	if r < utf8.RuneSelf {
		t.hash = (t.hash ^ uint64(r)) * fnvPrime
	} else {
		var b [utf8.UTFMax]byte
		n := utf8.EncodeRune(b[:], r)
		for _, c := range b[:n] {
			t.hash = (t.hash ^ uint64(c)) * fnvPrime
		}
	}
	if t.prefixes != nil {
		t.notePrefix()
	}
}

// notePrefix records the hash of the token read so far (a prefix of the
// finished token) and marks the token novel when no earlier token began
// the same way. The token's own shorter prefixes are in the set too, but
// they are other strings: only a hash collision, which holds more text
// back, never less, can make them look alike. Novelty is sticky: a token
// whose prefix no earlier token had can never equal one.
func (t *tokenizer) notePrefix() {
	k := ((t.hash ^ uint64(t.kind)) * prefixMix) >> (64 - prefixBits)
	w, bit := k/64, uint64(1)<<(k%64)
	if t.prefixes[w]&bit == 0 {
		t.novel = true
		t.prefixes[w] |= bit
	}
}

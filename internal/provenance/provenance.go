// Package provenance finds where the bytes of a tool call's argument
// values came from: the user's messages, the system prompt, a tool's
// declaration, a tool result (flagged as injected or not), or nowhere (the
// model's own words).
//
// Every source text of the conversation is folded (see Fold: case,
// whitespace, punctuation, zero-width and look-alike characters fall
// away) and each run of Gram folded bytes is recorded in a table with the
// kinds of source that hold it and where the first private source holds
// it. A value is folded the same way and also decoded every way a model
// hides a copy (URL escapes, base64 at any of the four alignments, hex at
// either, ROT13); each decoding's grams are looked up, and consecutive
// grams that continue one another in one private source form a Run: a
// copied stretch of the system prompt or of a tool result.
//
// The table is written for the job (open addressing over the grams packed
// into a uint64, no hashing library): a Go map cost about three times as
// much per byte of conversation, and the index is built for every request
// that carries a tool call.
package provenance

import (
	"strings"
)

// Gram is how many folded bytes one table entry covers; a copy shorter
// than this is not found.
const Gram = 6

// Kind is a kind of source.
type Kind uint8

// The kinds of source, Nowhere first (no source holds the bytes).
const (
	Nowhere Kind = iota
	User
	System
	Declaration
	Result
	FlaggedResult
	numKinds
)

var kindNames = [numKinds]string{"nowhere", "the user", "the system prompt", "a tool declaration", "a tool result", "an injected tool result"}

func (k Kind) String() string {
	if k < numKinds {
		return kindNames[k]
	}
	return "unknown"
}

// Private reports whether data from k must not leave for a destination
// nobody trustworthy named: the system prompt and what tools returned.
func (k Kind) Private() bool { return k == System || k == Result || k == FlaggedResult }

// Mask is a set of kinds.
type Mask uint8

// Has reports whether k is in m.
func (m Mask) Has(k Kind) bool { return m&(1<<k) != 0 }

// Source is one text of the conversation.
type Source struct {
	Kind Kind
	// Tool names the tool of a result or a declaration.
	Tool string
	// Msg is the message index (-1 for a declaration).
	Msg int
	// Why says why a flagged result was flagged.
	Why  string
	Text string

	lower  string // Text in lower case, for naming destinations
	folded []byte
}

// entry is one gram's record.
type entry struct {
	key  uint64 // the gram's bytes, plus 1 so that 0 marks a free slot
	mask Mask
	src  int32 // first private source holding the gram, or -1
	pos  int32 // the gram's offset in that source's folded text
}

// Index is the conversation's sources and their grams. It is built once
// per request and read by one goroutine at a time.
type Index struct {
	Sources []Source
	slots   []entry
	used    int
	// scratch buffers reused by Trace
	buf, dec, rot []byte
}

// maxIndexed caps the folded bytes indexed per source (a tool result of
// megabytes is indexed up to here; grams after it are not found).
const maxIndexed = 1 << 20

// New indexes sources.
func New(sources []Source) *Index {
	ix := &Index{Sources: sources}
	total := 0
	for i := range sources {
		total += len(sources[i].Text)
	}
	size := 64
	for size < 2*total {
		size <<= 1
	}
	ix.slots = make([]entry, size)
	var folded []byte
	for i := range ix.Sources {
		s := &ix.Sources[i]
		s.lower = strings.ToLower(s.Text)
		start := len(folded)
		folded = Fold(folded, s.Text)
		if len(folded)-start > maxIndexed {
			folded = folded[:start+maxIndexed]
		}
		s.folded = folded[start:len(folded):len(folded)]
		ix.add(i, s)
	}
	return ix
}

func pack(b []byte) uint64 {
	_ = b[Gram-1]
	return (uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32 | uint64(b[5])<<40) + 1
}

func (ix *Index) slot(key uint64) int {
	mask := len(ix.slots) - 1
	i := int((key * 0x9E3779B97F4A7C15) >> 40 & uint64(mask))
	for {
		e := &ix.slots[i]
		if e.key == key || e.key == 0 {
			return i
		}
		i = (i + 1) & mask
	}
}

func (ix *Index) add(id int, s *Source) {
	f := s.folded
	bit := Mask(1) << s.Kind
	priv := s.Kind.Private()
	for i := 0; i+Gram <= len(f); i++ {
		if ix.used*2 >= len(ix.slots) {
			ix.grow()
		}
		key := pack(f[i:])
		e := &ix.slots[ix.slot(key)]
		if e.key == 0 {
			*e = entry{key: key, src: -1}
			ix.used++
		}
		e.mask |= bit
		if priv && e.src < 0 {
			e.src, e.pos = int32(id), int32(i)
		}
	}
}

func (ix *Index) grow() {
	old := ix.slots
	ix.slots = make([]entry, 2*len(old))
	for _, e := range old {
		if e.key != 0 {
			ix.slots[ix.slot(e.key)] = e
		}
	}
}

func (ix *Index) lookup(key uint64) *entry {
	e := &ix.slots[ix.slot(key)]
	if e.key == 0 {
		return nil
	}
	return e
}

// Encoding says how a copy was hidden.
type Encoding uint8

// The encodings a value is decoded by.
const (
	Plain Encoding = iota
	URLEscaped
	Base64
	Hex
	ROT13
)

var encodingNames = [...]string{"verbatim", "URL-escaped", "base64-encoded", "hex-encoded", "ROT13-encoded"}

func (e Encoding) String() string {
	if int(e) < len(encodingNames) {
		return encodingNames[e]
	}
	return "unknown"
}

// Run is a stretch of one private source found in a value.
type Run struct {
	// Src indexes Index.Sources; Pos and Len are in its folded text.
	Src, Pos, Len int
	Via           Encoding
}

// Trace is where a value's bytes came from.
type Trace struct {
	// Runs are the private stretches the value copies that neither the
	// user nor a tool declaration also holds.
	Runs []Run
	// Folded is the value's folded length; Found counts, per kind, the
	// folded bytes of the plain value that kind holds.
	Folded int
	Found  [numKinds]int
}

// Trace finds where value's bytes came from; runs are appended to
// t.Runs (t may be reused).
func (ix *Index) Trace(value string, t *Trace) {
	ix.buf = Fold(ix.buf[:0], value)
	t.Folded += len(ix.buf)
	ix.scan(ix.buf, Plain, &t.Found, t)
	ix.rot = rot13(ix.rot[:0], ix.buf)
	ix.scan(ix.rot, ROT13, nil, t)
	raw := []byte(value)
	if strings.IndexByte(value, '%') >= 0 {
		raw = unescapeURL(nil, value)
		ix.buf = Fold(ix.buf[:0], string(raw))
		ix.scan(ix.buf, URLEscaped, nil, t)
	}
	hexRuns(raw, func(run []byte) {
		for off := 0; off < 2; off++ {
			ix.dec = decodeHex(ix.dec[:0], run, off)
			ix.buf = foldBytes(ix.buf[:0], ix.dec)
			ix.scan(ix.buf, Hex, nil, t)
		}
	})
	b64Runs(raw, func(run []byte) {
		for off := 0; off < 4; off++ {
			ix.dec = decodeB64(ix.dec[:0], run, off)
			ix.buf = foldBytes(ix.buf[:0], ix.dec)
			ix.scan(ix.buf, Base64, nil, t)
		}
	})
}

// scan looks up every gram of folded, counts per kind in found (when not
// nil) and appends the private runs to t.
func (ix *Index) scan(folded []byte, via Encoding, found *[numKinds]int, t *Trace) {
	var last [numKinds]int // end of the coverage counted per kind
	run := Run{Src: -1}
	prevPos := -2
	flush := func() {
		if run.Src >= 0 {
			t.Runs = append(t.Runs, run)
		}
		run = Run{Src: -1}
		prevPos = -2
	}
	for i := 0; i+Gram <= len(folded); i++ {
		e := ix.lookup(pack(folded[i:]))
		if e == nil {
			flush()
			continue
		}
		if found != nil {
			for k := Kind(0); k < numKinds; k++ {
				if e.mask.Has(k) {
					from := max(i, last[k])
					found[k] += i + Gram - from
					last[k] = i + Gram
				}
			}
		}
		if e.src < 0 || e.mask.Has(User) || e.mask.Has(Declaration) {
			flush()
			continue
		}
		if run.Src == int(e.src) && int(e.pos) == prevPos+1 {
			run.Len++
			prevPos++
			continue
		}
		flush()
		run = Run{Src: int(e.src), Pos: int(e.pos), Len: Gram, Via: via}
		prevPos = int(e.pos)
	}
	flush()
}

// Secretlike reports whether the folded stretch [pos, pos+n) of source
// src mixes letters and digits, as keys, passwords and tokens do.
func (ix *Index) Secretlike(src, pos, n int) bool {
	if src < 0 || src >= len(ix.Sources) {
		return false
	}
	f := ix.Sources[src].folded
	if pos < 0 || pos+n > len(f) {
		return false
	}
	letters, digits := false, false
	for _, c := range f[pos : pos+n] {
		letters = letters || c >= 'a' && c <= 'z' || c >= 0x80
		digits = digits || c >= '0' && c <= '9'
	}
	return letters && digits
}

// Named returns the kinds of source whose text names s (lower case) and
// the first result or declaration that does, or -1.
func (ix *Index) Named(s string) (Mask, int) {
	var m Mask
	first := -1
	for i := range ix.Sources {
		src := &ix.Sources[i]
		if strings.Contains(src.lower, s) {
			m |= 1 << src.Kind
			if first < 0 && (src.Kind == Result || src.Kind == FlaggedResult || src.Kind == Declaration) {
				first = i
			}
		}
	}
	return m, first
}

// Lower returns source i's text in lower case.
func (ix *Index) Lower(i int) string { return ix.Sources[i].lower }

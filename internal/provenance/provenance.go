// Package provenance finds where the bytes of a tool call's argument
// values came from: the user's messages, the system prompt, a tool's
// declaration, a tool result (flagged as injected or not), or nowhere (the
// model's own words).
//
// Every source text of the conversation is folded once (see Fold: case,
// whitespace, punctuation, zero-width and look-alike characters fall
// away). A call's values are folded the same way and also decoded every
// way a model hides a copy (URL escapes, base64 at any of the four
// alignments, hex at either, ROT13); the Gram-byte runs of all of those
// go into a small table, and one pass over the folded conversation marks
// which kinds of source hold each and where the first private source
// holds it. Consecutive grams of a value that continue one another in one
// private source form a Run: a copied stretch of the system prompt or of a
// tool result.
//
// The table is written for the job (open addressing over the grams packed
// into a uint64). Indexing the conversation instead of the call cost about
// 170 us per KiB (a table of every gram of the conversation, missed in
// cache on every byte); the call's table stays in the first-level cache.
package provenance

import (
	"bytes"
	"strings"
	"sync"
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

// entry is one gram's record, 16 bytes.
type entry struct {
	key uint64 // the gram's bytes; 0 marks a free slot (folded bytes are never 0)
	// at holds the kinds of source holding the gram (bits 0-7), the first
	// private source holding it plus one (bits 8-31, 0 for none) and the
	// gram's offset in that source's folded text (bits 32-63).
	at uint64
}

func (e *entry) mask() Mask { return Mask(e.at) }

// first returns the first private source holding the gram (-1 for none)
// and the gram's offset there.
func (e *entry) first() (src, pos int) {
	return int(e.at>>8&0xFFFFFF) - 1, int(e.at >> 32)
}

// stream is one folded form of one value, in Index.arena.
type stream struct {
	val, from, to int
	via           Encoding
}

// Index is the conversation's folded sources. It is built once per
// request and used by one goroutine at a time.
type Index struct {
	Sources []Source
	*scratch
	tmp   []byte // Locate's and NamedFold's
	named map[string]named
}

// scratch is the table TraceAll builds of a call's values and the
// decodings it folds them into. It is TraceAll's alone: taken from a pool
// when it begins and put back when it returns, so neither a request's
// calls nor the requests after it allocate and clear it again.
type scratch struct {
	slots []entry
	used  int
	// bloom has a bit set for every gram of the table: the pass over the
	// conversation probes the table only where the bit is set, and most
	// of the conversation's grams are not the call's.
	bloom        []uint64
	arena, dec   []byte
	streams      []stream
	unescapedURL []byte
}

var scratchPool = sync.Pool{New: func() any { return &scratch{bloom: make([]uint64, bloomBits/64)} }}

// maxPooledSlots bounds the table kept for the next call (1 MiB): one
// huge value does not pin its table for the process's life.
const maxPooledSlots = 1 << 16

// maxIndexed caps the folded bytes indexed per source (a tool result of
// megabytes is indexed up to here; grams after it are not found).
const maxIndexed = 1 << 20

// New folds the sources.
func New(sources []Source) *Index {
	ix := &Index{Sources: sources}
	total := 0
	for i := range sources {
		total += len(sources[i].Text)
	}
	folded := make([]byte, 0, total)
	for i := range ix.Sources {
		s := &ix.Sources[i]
		start := len(folded)
		folded = Fold(folded, s.Text)
		if len(folded)-start > maxIndexed {
			folded = folded[:start+maxIndexed]
		}
		s.folded = folded[start:len(folded):len(folded)]
	}
	return ix
}

func pack(b []byte) uint64 {
	_ = b[Gram-1]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 | uint64(b[4])<<32 | uint64(b[5])<<40
}

const golden = 0x9E3779B97F4A7C15

// bloomBits is the size of the filter: 64 Ki bits, 8 KiB.
const bloomBits = 1 << 16

func (ix *Index) slot(key uint64) int {
	mask := len(ix.slots) - 1
	i := int((key * golden) >> 40 & uint64(mask))
	for {
		e := &ix.slots[i]
		if e.key == key || e.key == 0 {
			return i
		}
		i = (i + 1) & mask
	}
}

// insert adds a gram to the call's table.
func (ix *Index) insert(key uint64) {
	if ix.used*2 >= len(ix.slots) {
		ix.grow()
	}
	e := &ix.slots[ix.slot(key)]
	if e.key == 0 {
		*e = entry{key: key}
		ix.used++
		b := (key * golden) >> 48
		ix.bloom[b>>6] |= 1 << (b & 63)
	}
}

func (ix *Index) grow() {
	old := ix.slots
	ix.slots = make([]entry, max(64, 2*len(old)))
	for _, e := range old {
		if e.key != 0 {
			ix.slots[ix.slot(e.key)] = e
		}
	}
}

// reset empties the table for about n grams.
func (ix *Index) reset(n int) {
	size := 64
	for size < 2*n {
		size <<= 1
	}
	if cap(ix.slots) >= size {
		ix.slots = ix.slots[:size]
		clear(ix.slots)
	} else {
		ix.slots = make([]entry, size)
	}
	clear(ix.bloom)
	ix.used = 0
}

// lookup returns the record of a gram some source holds, or nil.
func (ix *Index) lookup(key uint64) *entry {
	e := &ix.slots[ix.slot(key)]
	if e.key == 0 || e.at&0xFF == 0 {
		return nil
	}
	return e
}

// mark records, for every gram of the table, the kinds of source that
// hold it: one pass over the folded conversation.
func (ix *Index) mark() {
	mask := len(ix.slots) - 1
	for id := range ix.Sources {
		s := &ix.Sources[id]
		f := s.folded
		if len(f) < Gram {
			continue
		}
		bit := Mask(1) << s.Kind
		priv := s.Kind.Private()
		key := pack(f) << 8
		for i := 0; i+Gram <= len(f); i++ {
			key = key>>8 | uint64(f[i+Gram-1])<<(8*(Gram-1))
			h := key * golden
			if ix.bloom[h>>54]&(1<<(h>>48&63)) == 0 {
				continue
			}
			j := int(h >> 40 & uint64(mask))
			for {
				e := &ix.slots[j]
				if e.key == key {
					e.at |= uint64(bit)
					if priv && e.at>>8&0xFFFFFF == 0 && id < 0xFFFFFF {
						e.at |= uint64(id+1)<<8 | uint64(i)<<32
					}
					break
				}
				if e.key == 0 {
					break
				}
				j = (j + 1) & mask
			}
		}
	}
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

// TraceAll traces the values of one call with one pass over the
// conversation; ts[i] receives values[i]'s runs and counts.
func (ix *Index) TraceAll(values []string, ts []Trace) {
	ix.scratch = scratchPool.Get().(*scratch)
	defer func() {
		if cap(ix.slots) <= maxPooledSlots {
			scratchPool.Put(ix.scratch)
		}
		ix.scratch = nil
	}()
	ix.arena, ix.streams = ix.arena[:0], ix.streams[:0]
	for vi, value := range values {
		plain := len(ix.arena)
		ix.arena = Fold(ix.arena, value)
		ts[vi].Folded += len(ix.arena) - plain
		ix.addStream(vi, plain, Plain)
		from := len(ix.arena)
		ix.arena = rot13(ix.arena, ix.arena[plain:from])
		ix.addStream(vi, from, ROT13)
		raw := value
		if strings.IndexByte(value, '%') >= 0 {
			ix.unescapedURL = unescapeURL(ix.unescapedURL[:0], value)
			raw = string(ix.unescapedURL)
			from = len(ix.arena)
			ix.arena = Fold(ix.arena, raw)
			ix.addStream(vi, from, URLEscaped)
		}
		hexRuns([]byte(raw), func(run []byte) {
			for off := 0; off < 2; off++ {
				ix.dec = decodeHex(ix.dec[:0], run, off)
				from := len(ix.arena)
				ix.arena = foldBytes(ix.arena, ix.dec)
				ix.addStream(vi, from, Hex)
			}
		})
		b64Runs([]byte(raw), func(run []byte) {
			for off := 0; off < 4; off++ {
				ix.dec = decodeB64(ix.dec[:0], run, off)
				from := len(ix.arena)
				ix.arena = foldBytes(ix.arena, ix.dec)
				ix.addStream(vi, from, Base64)
			}
		})
	}
	if len(ix.streams) == 0 {
		return // no value holds a gram: nothing to find, no pass to make
	}
	ix.reset(len(ix.arena))
	for _, st := range ix.streams {
		f := ix.arena[st.from:st.to]
		for i := 0; i+Gram <= len(f); i++ {
			ix.insert(pack(f[i:]))
		}
	}
	ix.mark()
	for _, st := range ix.streams {
		var found *[numKinds]int
		if st.via == Plain {
			found = &ts[st.val].Found
		}
		ix.scan(ix.arena[st.from:st.to], st.via, found, &ts[st.val])
	}
}

// addStream records the arena's bytes from from on as a stream of value
// val.
func (ix *Index) addStream(val, from int, via Encoding) {
	if len(ix.arena)-from >= Gram {
		ix.streams = append(ix.streams, stream{val: val, from: from, to: len(ix.arena), via: via})
	}
}

// scan looks up every gram of folded, counts per kind in found (when not
// nil) and appends the private runs to t.
func (ix *Index) scan(folded []byte, via Encoding, found *[numKinds]int, t *Trace) {
	var last [numKinds]int // end of the coverage counted per kind
	run := Run{Src: -1}
	prevPos, runStart := -2, 0 // runStart: the stream offset the run began at
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
				if e.mask().Has(k) {
					from := max(i, last[k])
					found[k] += i + Gram - from
					last[k] = i + Gram
				}
			}
		}
		if e.mask().Has(User) || e.mask().Has(Declaration) {
			flush()
			continue
		}
		// The run goes on where its source holds this gram next, though
		// the table records the gram's first place only (a repeated word,
		// a key that repeats a part of itself).
		if run.Src >= 0 {
			f := ix.Sources[run.Src].folded
			if p := prevPos + 1; p+Gram <= len(f) && bytes.Equal(f[p:p+Gram], folded[i:i+Gram]) {
				run.Len++
				prevPos++
				continue
			}
		}
		src, pos := e.first()
		if src < 0 {
			flush()
			continue
		}
		// A run that breaks here may go on in this gram's source: take
		// back the bytes before it that match there too, up to where the
		// broken run began (a key whose first gram the source also holds
		// earlier, in another word).
		back := 0
		if run.Src >= 0 {
			f := ix.Sources[src].folded
			for back < i-runStart && back < pos && folded[i-back-1] == f[pos-back-1] {
				back++
			}
		}
		flush()
		run = Run{Src: src, Pos: pos - back, Len: Gram + back, Via: via}
		runStart, prevPos = i-back, pos
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
// the first result or declaration that does, or -1. A request asks it
// for every destination of every call, the earlier turns' too, so each
// answer is kept, and the sources are searched for the byte of s that is
// rarest in text (see contains).
func (ix *Index) Named(s string) (Mask, int) {
	if n, ok := ix.named[s]; ok {
		return n.m, n.first
	}
	var m Mask
	first := -1
	k := rarest(s)
	for i := range ix.Sources {
		src := &ix.Sources[i]
		if contains(ix.Lower(i), s, k) {
			m |= 1 << src.Kind
			if first < 0 && (src.Kind == Result || src.Kind == FlaggedResult || src.Kind == Declaration) {
				first = i
			}
		}
	}
	if ix.named == nil {
		ix.named = map[string]named{}
	}
	if len(ix.named) < maxNamed {
		ix.named[s] = named{m, first}
	}
	return m, first
}

// named is an answer of Named.
type named struct {
	m     Mask
	first int
}

// maxNamed bounds the answers Named keeps.
const maxNamed = 4096

// byteRank ranks bytes by how common they are in the text of a
// conversation in lower case (prose, JSON, code): 0 for the most common,
// 255 for the ones not listed, which are the rarest.
var byteRank = func() (t [256]uint8) {
	for i := range t {
		t[i] = 255
	}
	for i, c := range []byte(" etaoinsrhldcumfpgwybv\"\n:,.k{}-_/0123456789()=x'j;q<>z[]\t*#+&|%?!@") {
		t[c] = uint8(i)
	}
	return t
}()

// rarest returns the index of the byte of s that byteRank ranks rarest.
func rarest(s string) int {
	k := 0
	for i := 1; i < len(s); i++ {
		if byteRank[s[i]] > byteRank[s[k]] {
			k = i
		}
	}
	return k
}

// contains reports whether text holds s, looking for s's byte at k (the
// rarest) and comparing around each. strings.Contains steps through the
// first byte of s, which in an address or a host ('s', 'h', 'w') is among
// the commonest of a conversation.
func contains(text, s string, k int) bool {
	if s == "" {
		return true
	}
	c := s[k]
	for from := k; from < len(text); {
		j := strings.IndexByte(text[from:], c)
		if j < 0 {
			return false
		}
		p := from + j - k
		if p+len(s) > len(text) {
			return false
		}
		if text[p:p+len(s)] == s {
			return true
		}
		from += j + 1
	}
	return false
}

// Lower returns source i's text in lower case (made on first use: only
// calls with destinations need it).
func (ix *Index) Lower(i int) string {
	s := &ix.Sources[i]
	if s.lower == "" && s.Text != "" {
		s.lower = strings.ToLower(s.Text)
	}
	return s.lower
}

// Locate returns where the folded form of s stands in source src's folded
// text, from byte from on, and its folded length; pos is -1 when the
// source does not hold it. Callers mark stretches of a source (a
// system-prompt canary) to judge the runs Trace reports against.
func (ix *Index) Locate(src, from int, s string) (pos, n int) {
	if src < 0 || src >= len(ix.Sources) {
		return -1, 0
	}
	ix.tmp = Fold(ix.tmp[:0], s)
	f := ix.Sources[src].folded
	if len(ix.tmp) == 0 || from < 0 || from > len(f) {
		return -1, len(ix.tmp)
	}
	i := bytes.Index(f[from:], ix.tmp)
	if i < 0 {
		return -1, len(ix.tmp)
	}
	return from + i, len(ix.tmp)
}

// NamedFold is Named after folding: the kinds of source whose folded text
// holds the folded s ("GB29 NWBK 6016 1331 9268 19" and
// "gb29nwbk60161331926819" name each other), and the first result or
// declaration that does, or -1. A folded s shorter than Gram names
// nothing.
func (ix *Index) NamedFold(s string) (Mask, int) {
	ix.tmp = Fold(ix.tmp[:0], s)
	if len(ix.tmp) < Gram {
		return 0, -1
	}
	var m Mask
	first := -1
	for i := range ix.Sources {
		src := &ix.Sources[i]
		if bytes.Contains(src.folded, ix.tmp) {
			m |= 1 << src.Kind
			if first < 0 && (src.Kind == Result || src.Kind == FlaggedResult || src.Kind == Declaration) {
				first = i
			}
		}
	}
	return m, first
}

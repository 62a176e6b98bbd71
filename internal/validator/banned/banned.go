// Package banned fails an output that contains a banned term or imports a
// banned library.
//
// Terms are matched case-insensitively (each rune lower-cased on its own,
// so "ÉCOLE" matches "école" but "STRASSE" does not match "straße"; curly
// apostrophes match straight ones) as whole words or phrases: a term that begins or ends
// with a letter or digit must not touch another letter or digit there, so
// "ass" does not match "class", and any run of white space in the output
// matches one space in a phrase ("credit  card" and "credit\ncard" match
// "credit card"). All terms are matched at once by an Aho-Corasick
// automaton over the folded text (see automaton) whose state carries over
// chunk boundaries, so a term split across chunks is found and the cost
// per byte does not grow with the number of terms.
//
// Libraries are matched only in code-shaped lines, parsed when a line is
// complete:
//
//	Python   import x, import x.y as z, from x import ..., from x.y import ...
//	JS/TS    require("x"), import ... from "x", import "x", export ... from "x", import("x")
//	Rust     use x::..., pub use x::..., extern crate x
//	Go       import "x", import alias "x", and import ( ... ) blocks
//	C/C++    #include <x.h>, #include "x.h"
//	R        library(x), require(x), requireNamespace("x")
//
// A banned library "x" matches the module "x" and its sub-modules
// ("x.y", "x/y", "x::y"); for Go and JS paths also the last path element
// ("github.com/a/x"), and for C headers "x.h". Prose that mentions a
// library ("you could use pandas") is not a finding; ban it as a term
// for that.
//
// Settled holds back only what could still become a match: the longest
// tail of the text that is a prefix of a term, a term match waiting for
// the next rune to confirm its right word boundary, and the current line
// when it could still be an import (it starts like one, or contains
// "require(" or "library(").
package banned

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Name is the registry name of the check.
const Name = "banned"

// Config is the policy section of the check (also built from prompt
// constraints such as "do not use pandas").
type Config struct {
	// Terms are words or phrases that must not appear.
	Terms []string `yaml:"terms" json:"terms"`
	// Libraries are modules, packages or crates that code in the output
	// must not import.
	Libraries []string `yaml:"libraries" json:"libraries"`
}

// DefaultConfig returns an empty configuration (nothing banned).
func DefaultConfig() *Config { return &Config{} }

// Register adds the check to r.
func Register(r *validator.Registry) {
	s := validator.Spec{
		Name:    Name,
		Summary: "fails on banned terms (whole words, any case) and on imports of banned libraries in code",
		Doc: `Terms are matched case-insensitively as whole words or phrases (white space
runs match a single space), all at once with a streaming Aho-Corasick
automaton. Libraries are matched only in import-shaped code lines: Python
import/from, JS require/import, Rust use/extern crate, Go import lines and
blocks, C #include, R library(). Holds back only a tail that could still
become a match.`,
		Reasons: []validator.Reason{validator.ReasonBannedContent},
		Example: "terms: [\"lorem ipsum\", \"as an AI language model\"]\nlibraries: [pandas, lodash]\n",
		Config:  func() any { return DefaultConfig() },
		New: func(cfg any, _ *validator.Request) (validator.Validator, error) {
			c, _ := cfg.(*Config)
			if c == nil || len(c.Terms) == 0 && len(c.Libraries) == 0 {
				return nil, nil
			}
			return New(*c)
		},
	}
	// A tool call's argument values are text the model wrote, read the
	// same way.
	s.Arguments = s.New
	r.Register(s)
}

// Matcher is the banned-content validator. Create it with New.
type Matcher struct {
	terms   []string // as configured, by pattern id
	ac      *automaton
	edgeL   []bool // pattern id -> its first rune is a word rune
	edgeR   []bool // pattern id -> its last rune is a word rune
	maxRune int

	// Text state, in folded runes.
	carry   [utf8.UTFMax]byte
	ncarry  int
	off     int   // bytes read, carried included
	state   int32 // automaton state
	nrunes  int   // folded runes fed
	ring    []runeInfo
	rmask   int
	inSpace bool // the last rune fed was a (collapsed) space
	pending []pending

	libs    *libMatcher
	closed  bool
	finding []validator.Finding
}

type runeInfo struct {
	start int  // byte offset in the output
	word  bool // a letter, digit or '_'
}

// pending is a term match whose right boundary is not yet known.
type pending struct {
	id, start, end int
}

// maxFindings bounds how many findings one output can produce.
const maxFindings = 32

var _ validator.Validator = (*Matcher)(nil)

// New compiles the configuration. Empty terms are an error.
func New(cfg Config) (*Matcher, error) {
	m := &Matcher{}
	seen := map[string]bool{}
	var folded []string
	for _, t := range cfg.Terms {
		f := foldTerm(t)
		if f == "" {
			return nil, fmt.Errorf("banned: term %q is empty", t)
		}
		if seen[f] {
			continue
		}
		seen[f] = true
		folded = append(folded, f)
		m.terms = append(m.terms, t)
		first, _ := utf8.DecodeRuneInString(f)
		last, _ := utf8.DecodeLastRuneInString(f)
		m.edgeL = append(m.edgeL, isWord(first))
		m.edgeR = append(m.edgeR, isWord(last))
		if n := utf8.RuneCountInString(f); n > m.maxRune {
			m.maxRune = n
		}
	}
	if len(folded) > 0 {
		m.ac = buildAutomaton(folded)
		size := 1
		for size < m.maxRune+2 {
			size <<= 1
		}
		m.ring = make([]runeInfo, size)
		m.rmask = size - 1
	}
	if len(cfg.Libraries) > 0 {
		l, err := newLibMatcher(cfg.Libraries)
		if err != nil {
			return nil, err
		}
		m.libs = l
	}
	return m, nil
}

// foldTerm folds a term the way the output is folded: lower case, white
// space runs to one space, trimmed.
func foldTerm(t string) string {
	var b strings.Builder
	space := false
	for _, r := range strings.TrimSpace(t) {
		if unicode.IsSpace(r) {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteRune(fold(r))
	}
	return b.String()
}

func fold(r rune) rune {
	if r < utf8.RuneSelf {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	switch r {
	case '’', '‘', 'ʼ':
		return '\''
	}
	return unicode.ToLower(r)
}

func isWord(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_'
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// Name returns "banned".
func (m *Matcher) Name() string { return Name }

// Findings returns the matches so far, in order of Start.
func (m *Matcher) Findings() []validator.Finding { return m.finding }

// Write feeds the next piece of output.
func (m *Matcher) Write(p []byte) (int, error) {
	n := len(p)
	if m.closed {
		return n, nil
	}
	for m.ncarry > 0 && len(p) > 0 {
		m.carry[m.ncarry] = p[0]
		m.ncarry++
		m.off++
		p = p[1:]
		if utf8.FullRune(m.carry[:m.ncarry]) {
			r, size := utf8.DecodeRune(m.carry[:m.ncarry])
			rest := m.ncarry - size
			m.ncarry = 0
			m.rune(r, m.off-size-rest, size)
			m.off -= rest
			if rest > 0 {
				back := append(append([]byte(nil), m.carry[size:size+rest]...), p...)
				p = back
			}
		}
	}
	for i := 0; i < len(p); {
		b := p[i]
		if b < utf8.RuneSelf {
			if len(m.pending) == 0 && asciiPlain[b] && m.ac != nil {
				// Fast path: a letter or digit and no match waiting for its
				// boundary (what libMatcher.rune and rune do, inlined).
				if l := m.libs; l != nil {
					if len(l.line) == 0 {
						l.lineStart = m.off
					}
					if len(l.line) < maxLine {
						l.line = append(l.line, b)
					}
				}
				m.inSpace = false
				m.ring[m.nrunes&m.rmask] = runeInfo{start: m.off, word: true}
				m.nrunes++
				m.state = m.ac.step(m.state, b|0x20*asciiUpper(b))
				if m.ac.out[m.state] >= 0 || m.ac.outNext[m.state] >= 0 {
					m.outputs(m.off + 1)
				}
				m.off++
				i++
				continue
			}
			m.rune(rune(b), m.off, 1)
			m.off++
			i++
			continue
		}
		if !utf8.FullRune(p[i:]) {
			m.ncarry = copy(m.carry[:], p[i:])
			m.off += m.ncarry
			break
		}
		r, size := utf8.DecodeRune(p[i:])
		m.rune(r, m.off, size)
		m.off += size
		i += size
	}
	return n, nil
}

// Close confirms matches at the end of the text and parses the last line.
func (m *Matcher) Close() {
	if m.closed {
		return
	}
	if m.ncarry > 0 {
		m.rune(utf8.RuneError, m.off-m.ncarry, m.ncarry)
		m.ncarry = 0
	}
	for _, pm := range m.pending {
		m.report(pm)
	}
	m.pending = m.pending[:0]
	if m.libs != nil {
		m.libs.close(m.add)
	}
	m.closed = true
}

// Settled returns the start of the earliest text that could still become
// part of a match.
func (m *Matcher) Settled() int {
	if m.closed {
		if len(m.finding) > 0 {
			return min(m.finding[0].Start, m.off)
		}
		return m.off
	}
	s := m.off - m.ncarry
	if m.ac != nil {
		if d := int(m.ac.depth[m.state]); d > 0 {
			s = min(s, m.ring[(m.nrunes-d)&m.rmask].start)
		}
		for _, pm := range m.pending {
			s = min(s, pm.start)
		}
	}
	if m.libs != nil {
		s = min(s, m.libs.hold())
	}
	if len(m.finding) > 0 {
		s = min(s, m.finding[0].Start)
	}
	return s
}

// rune feeds one output rune, size bytes at byte offset at.
func (m *Matcher) rune(r rune, at, size int) {
	if m.libs != nil {
		m.libs.rune(r, at, size, m.add)
	}
	if m.ac == nil {
		return
	}
	word := isWord(r)
	// A pending match is confirmed (or dropped) by the rune after it.
	if len(m.pending) > 0 {
		if !word {
			for _, pm := range m.pending {
				m.report(pm)
			}
		}
		m.pending = m.pending[:0]
	}
	var f rune
	if r < utf8.RuneSelf && (r == ' ' || r == '\n' || r == '\t' || r == '\r') || r >= utf8.RuneSelf && unicode.IsSpace(r) {
		if m.inSpace {
			return // a run of white space is one space
		}
		m.inSpace = true
		f = ' '
	} else {
		m.inSpace = false
		f = fold(r)
	}
	m.ring[m.nrunes&m.rmask] = runeInfo{start: at, word: word}
	m.nrunes++
	if f < utf8.RuneSelf {
		m.state = m.ac.step(m.state, byte(f))
	} else {
		var buf [utf8.UTFMax]byte
		n := utf8.EncodeRune(buf[:], f)
		for _, b := range buf[:n] {
			m.state = m.ac.step(m.state, b)
		}
	}
	m.outputs(at + size)
}

// outputs reports the terms that end at the rune just fed (end is its
// byte end).
func (m *Matcher) outputs(end int) {
	for s := m.state; s >= 0; s = m.ac.outNext[s] {
		id := m.ac.out[s]
		if id < 0 {
			continue
		}
		m.match(int(id), end)
	}
}

// asciiPlain marks ASCII letters and digits: word runes that fold to
// themselves or by one bit.
var asciiPlain = func() (t [utf8.RuneSelf]bool) {
	for c := byte('0'); c <= '9'; c++ {
		t[c] = true
	}
	for c := byte('a'); c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	return t
}()

func asciiUpper(b byte) byte {
	if b >= 'A' && b <= 'Z' {
		return 1
	}
	return 0
}

// match handles a term that ends at the rune just fed (end is its byte end).
func (m *Matcher) match(id, end int) {
	n := m.ac.plen[id]
	first := m.nrunes - n
	if m.edgeL[id] && first > 0 && m.ring[(first-1)&m.rmask].word {
		return // "class" does not contain the word "ass"
	}
	pm := pending{id: id, start: m.ring[first&m.rmask].start, end: end}
	if m.edgeR[id] {
		m.pending = append(m.pending, pm)
		return
	}
	m.report(pm)
}

func (m *Matcher) report(pm pending) {
	m.add(validator.Finding{
		Check: Name, Reason: validator.ReasonBannedContent, Start: pm.start, End: pm.end,
		Message: fmt.Sprintf("banned term %q", m.terms[pm.id]),
	})
}

// add records a finding, keeping them in order of Start.
func (m *Matcher) add(f validator.Finding) {
	if len(m.finding) >= maxFindings {
		return
	}
	i := sort.Search(len(m.finding), func(i int) bool {
		a := m.finding[i]
		return a.Start > f.Start || a.Start == f.Start && a.End > f.End
	})
	m.finding = append(m.finding, validator.Finding{})
	copy(m.finding[i+1:], m.finding[i:])
	m.finding[i] = f
}

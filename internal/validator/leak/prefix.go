package leak

import (
	"bytes"
	"strings"
)

// Which letters of a word in progress may be released.
//
// A credential found in a word is reported from the start of its value (the
// rule's group 1), and that start can only be a position where one of the
// shapes below can begin: "-----BEGIN" or the first byte after "user:" in
// a URL. While a word streams, every position
// from which what has come so far can no longer grow into such a shape is
// cleared for good (the shapes are prefix-closed: text that is not the
// beginning of a match never becomes one), so the word is held only from
// the first position that still could. "Here" is released letter by letter;
// "sk-" waits, "sky" goes; "AKIA" waits until it is a whole 20-byte key or
// stops looking like one. The checks here are looser than the rules (no
// entropy, placeholder or right-edge test): they may hold a little too
// much, never too little.

// segment is one piece of a credential shape: literal alternatives ("" for
// an optional piece), or a run of bytes of one class of min..max bytes
// (max < 0: unbounded).
type segment struct {
	lits     []string
	class    func(c byte) bool
	min, max int
}

// leftEdge says whether a credential may begin at word[i] given the bytes
// before it in the word.
type leftEdge func(word []byte, i int) bool

type credShape struct {
	first string // the bytes a value of this shape can begin with; "" = any
	left  leftEdge
	segs  []segment
}

func lits(s ...string) segment { return segment{lits: s} }

func run(class func(byte) bool, lo, hi int) segment {
	return segment{class: class, min: lo, max: hi}
}

func urlPassByte(c byte) bool { return c != '/' && c != '@' && !isSpaceByte(c) }
func urlHostByte(c byte) bool { return c != '/' && !isSpaceByte(c) }

func anywhere([]byte, int) bool { return true }

// afterURLUser: the password of "scheme://user:password@host" begins
// right after a ':' that follows "://".
func afterURLUser(word []byte, i int) bool {
	return i >= 2 && word[i-1] == ':' && bytes.Contains(word[:i-1], []byte("://"))
}

// credShapes mirror the group the word rule reports (creds.go: a
// password in a URL) and the private-key header, whose line rule reports
// from its first dash. The token shapes gitleaks' rules know are held by
// their own stream (secretrules.Stream.Held).
var credShapes = []credShape{
	{"", afterURLUser, []segment{run(urlPassByte, 6, 128), lits("@"), run(urlHostByte, 1, -1)}},
	{"-", anywhere, []segment{lits("-----BEGIN")}},
}

// credFirst marks the bytes some shape can begin with; positions holding
// another byte are checked by afterURLUser alone.
var credFirst = func() (t [256]bool) {
	for _, s := range credShapes {
		for i := 0; i < len(s.first); i++ {
			t[s.first[i]] = true
		}
	}
	return t
}()

// mayBeginCred reports whether a credential value could begin at word[i],
// given the word so far.
func mayBeginCred(word []byte, i int) bool {
	c := word[i]
	if !credFirst[c] && (i == 0 || word[i-1] != ':') {
		return false
	}
	for k := range credShapes {
		s := &credShapes[k]
		if s.first != "" && strings.IndexByte(s.first, c) < 0 {
			continue
		}
		if s.left(word, i) && canGrowInto(word[i:], s.segs) {
			return true
		}
	}
	return false
}

// canGrowInto reports whether s is the beginning of a string of the shape
// segs, or already holds a whole one as its beginning (a match that ends
// inside the word is still reported).
func canGrowInto(s []byte, segs []segment) bool {
	if len(s) == 0 || len(segs) == 0 {
		return true
	}
	g := &segs[0]
	if g.class == nil {
		for _, l := range g.lits {
			n := min(len(l), len(s))
			if string(s[:n]) != l[:n] {
				continue
			}
			if n == len(s) || canGrowInto(s[n:], segs[1:]) {
				return true
			}
		}
		return false
	}
	k := 0
	for k < len(s) && (g.max < 0 || k < g.max) && g.class(s[k]) {
		k++
	}
	if k == len(s) {
		return true // s ends inside the run
	}
	for j := k; j >= g.min; j-- {
		if canGrowInto(s[j:], segs[1:]) {
			return true
		}
	}
	return false
}

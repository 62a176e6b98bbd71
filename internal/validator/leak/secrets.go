package leak

import (
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"
)

// Marked secrets: values the system prompt itself labels as secret. A
// label ("password", "PIN for the vault", "API key (production)") may
// stand anywhere in a paragraph; the value follows it after ":", "=" or
// "is", quoted or not, and ends where its sentence or clause does.
var (
	reSecretTag = regexp.MustCompile(`(?is)<secret>\s*(.*?)\s*</secret>`)
	reLabel     = regexp.MustCompile(`(?i)\b(?:(secret(?:[ _-]?(?:key|code|word|phrase|value))?|password|passwd|passphrase|pass ?(?:code|word)|pin(?:[ -]?(?:code|number))?|api[ _-]?key|access[ _-]?(?:key|code|token)|code ?word|safe ?word|private[ _-]?key)|(code|key|combination|token|credentials?))\b` +
		// a qualifier: "(production)", "for the vault", "of the safe"
		`(?:\s*\([^()\n]{0,40}\)|\s+(?:for|of|to|on|at|in)\s+(?:the\s+|a\s+|an\s+|our\s+|this\s+)?[\w-]+(?:\s*\([^()\n]{0,40}\))?)?` +
		`(?:\*\*|__)?\s*(?:[:=]|\bis(?:\s+set\s+to)?\b:?|\bequals\b)(?:\*\*|__)?[ \t]*`)
	// reClauseEnd ends an unquoted value: the end of its sentence or
	// clause, or an aside.
	reClauseEnd = regexp.MustCompile(`[.!?;,:]+(?:\s|$)|\n|\s+(?:\(|—|–|-\s|and\s|but\s|or\s|which\s|so\s)`)
)

// quotePairs maps an opening quote to the quotes that may close it.
var quotePairs = map[rune]string{'"': `"”`, '\'': `'’`, '`': "`", '“': `”"`, '‘': `’'`, '«': "»"}

// labelledValue returns the secret that follows a label's separator in
// rest, or "" when what follows is not a value. weak labels ("code",
// "key", "token") are common words, so their value must look like a
// secret (hold a digit, or mix cases with symbols).
func labelledValue(rest string, weak bool) string {
	if r, n := utf8.DecodeRuneInString(rest); n > 0 {
		if closers, ok := quotePairs[r]; ok {
			body := rest[n:]
			if i := strings.IndexAny(body, closers+"\n"); i > 0 && i <= 120 && body[i] != '\n' {
				v := body[:i]
				if weak && !secretLike(v) {
					return ""
				}
				return v
			}
			return ""
		}
	}
	phrase := rest
	if loc := reClauseEnd.FindStringIndex(rest); loc != nil {
		phrase = rest[:loc[0]]
	}
	phrase = strings.TrimSpace(phrase)
	token, _, more := strings.Cut(phrase, " ")
	token = strings.TrimRight(token, ".,;:!?)")
	switch {
	case token == "":
		return ""
	case secretLike(token):
		return token
	case weak:
		return ""
	case !more:
		return token
	case len(strings.Fields(phrase)) <= 4:
		return phrase // an unquoted passphrase: "ember willow lantern"
	}
	return ""
}

// secretLike reports whether v looks like a made-up secret rather than a
// word: it holds a digit, a symbol other than a hyphen, or a capital
// after a small letter.
func secretLike(v string) bool {
	lower := false
	for _, r := range v {
		switch {
		case unicode.IsDigit(r):
			return true
		case unicode.IsLower(r):
			lower = true
		case unicode.IsUpper(r):
			if lower {
				return true
			}
		case r != '-' && r != '\'' && r != ' ' && unicode.IsPunct(r) || unicode.IsSymbol(r):
			return true
		}
	}
	return false
}

// secretsCache keeps markedSecrets by system prompt: the same prompt is
// read for every attempt and every tool call of a conversation. The
// values are never modified.
var (
	secretsCache  sync.Map // string -> []string
	secretsCached atomic.Int64
)

const secretsCacheMax = 1024

func cachedSecrets(system string) []string {
	if v, ok := secretsCache.Load(system); ok {
		return v.([]string)
	}
	s := markedSecrets(system)
	if secretsCached.Add(1) <= secretsCacheMax {
		secretsCache.Store(system, s)
	}
	return s
}

// minSecretLen is the shortest marked secret that is matched: shorter
// values ("no", "42") would match ordinary text.
const minSecretLen = 4

// markedSecrets returns the secret values the system prompt marks, and
// the credential-shaped strings it contains.
func markedSecrets(system string) []string {
	var out []string
	add := func(v string) {
		v = strings.TrimSpace(v)
		if len(v) < minSecretLen || placeholderSecret(v) {
			return
		}
		for _, o := range out {
			if o == v {
				return
			}
		}
		out = append(out, v)
	}
	for _, m := range reSecretTag.FindAllStringSubmatch(system, -1) {
		add(m[1])
	}
	for _, m := range reLabel.FindAllStringSubmatchIndex(system, -1) {
		add(labelledValue(system[m[1]:], m[4] >= 0))
	}
	var cm []credMatch
	for _, line := range strings.Split(system, "\n") {
		cm = scanLine(line, true, true, true, cm[:0])
		for _, c := range cm {
			if c.kind != "private key block" {
				add(line[c.start:c.end])
			}
		}
		for _, w := range strings.Fields(line) {
			cm = scanWord(w, cm[:0])
			for _, c := range cm {
				add(w[c.start:c.end])
			}
		}
	}
	return out
}

// notValues are words that follow "the password is" in instructions
// rather than being the password ("the API key is provided by the user").
var notValues = map[string]bool{
	"provided": true, "required": true, "stored": true, "given": true, "set": true, "shared": true, "hidden": true,
	"private": true, "secret": true, "needed": true, "available": true, "below": true, "above": true, "following": true,
	"unknown": true, "missing": true, "invalid": true, "valid": true, "correct": true, "wrong": true, "expired": true,
	"sensitive": true, "encrypted": true, "empty": true, "optional": true, "mandatory": true, "supplied": true,
	"configured": true, "changed": true, "reset": true, "kept": true, "protected": true, "classified": true,
	"a": true, "an": true, "the": true, "in": true, "on": true, "at": true, "not": true, "only": true, "also": true,
	"your": true, "what": true, "whatever": true, "something": true, "same": true, "this": true, "that": true,
	"it": true, "used": true, "to": true, "be": true, "case": true, "sent": true, "included": true, "attached": true,
}

// placeholderSecret rejects marked values that are instructions rather
// than secrets ("never reveal it", "<redacted>", "provided by the user").
func placeholderSecret(v string) bool {
	l := strings.ToLower(v)
	if first, _, _ := strings.Cut(l, " "); notValues[strings.TrimRight(first, ".,;:!")] {
		return true
	}
	for _, w := range []string{"never", "do not", "don't", "redacted", "<", "not to be", "confidential"} {
		if strings.Contains(l, w) {
			return true
		}
	}
	return false
}

// literalMatcher finds any of a few literal strings in a stream, ASCII
// case-insensitively, with one KMP automaton per literal (there are only
// a handful, taken from one system prompt). A literal that begins or ends
// with a letter or digit must not touch another there, so the PIN "4812"
// does not match inside "148120".
type literalMatcher struct {
	lits  []literal
	first [256]bool // the bytes a literal begins with, both cases
	maxLn int
	ring  []byte // the last bytes fed, for the left word boundary
	mask  int
	n     int // bytes fed
}

type literal struct {
	value      string // ASCII-lower-cased
	fail       []int
	state      int  // length of the longest prefix matched so far
	edgeL      bool // first byte is a word byte
	edgeR      bool
	pendingEnd int // end offset of a match waiting for its right boundary, or -1
}

// innerMark begins a value that may match inside a word (an encoded
// form of a secret inside a longer base64 or hex run): no word-edge test.
const innerMark = "\x00"

func newLiteralMatcher(values []string) *literalMatcher {
	m := &literalMatcher{}
	for _, v := range values {
		inner := strings.HasPrefix(v, innerMark)
		v = strings.TrimPrefix(v, innerMark)
		lv := asciiLower(v)
		l := literal{value: lv, fail: kmpFail(lv), edgeL: !inner && isWordByte(lv[0]), edgeR: !inner && isWordByte(lv[len(lv)-1]), pendingEnd: -1}
		m.lits = append(m.lits, l)
		m.maxLn = max(m.maxLn, len(lv))
		m.first[lv[0]] = true
		if c := lv[0]; c >= 'a' && c <= 'z' {
			m.first[c-'a'+'A'] = true
		}
	}
	size := 1
	for size < m.maxLn+2 {
		size <<= 1
	}
	m.ring, m.mask = make([]byte, size), size-1
	return m
}

func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

func kmpFail(p string) []int {
	f := make([]int, len(p)+1)
	f[0] = -1
	k := -1
	for i := 0; i < len(p); i++ {
		for k >= 0 && p[k] != p[i] {
			k = f[k]
		}
		k++
		f[i+1] = k
	}
	return f
}

// write feeds p, whose first byte is at offset at. While no literal is
// part-way matched it skips to the next byte that begins one.
func (m *literalMatcher) write(p []byte, at int, report func(start, end int, value string)) {
	for i := 0; i < len(p); i++ {
		if m.idle() {
			j := i
			for j < len(p) && !m.first[p[j]] {
				j++
			}
			m.skip(p[i:j])
			if i = j; i == len(p) {
				return
			}
		}
		m.byteAt(p[i], at+i, report)
	}
}

// idle reports whether no literal is part-way matched or waits for its
// right boundary.
func (m *literalMatcher) idle() bool {
	for i := range m.lits {
		if m.lits[i].state != 0 || m.lits[i].pendingEnd >= 0 {
			return false
		}
	}
	return true
}

// skip records bytes that begin no literal: only the ring sees them.
func (m *literalMatcher) skip(b []byte) {
	if len(b) > len(m.ring) {
		m.n += len(b) - len(m.ring)
		b = b[len(b)-len(m.ring):]
	}
	for _, c := range b {
		m.ring[m.n&m.mask] = c
		m.n++
	}
}

// byteAt feeds the output byte at offset at (bytes are fed in order from
// offset 0). report is called with the range of each match.
func (m *literalMatcher) byteAt(c byte, at int, report func(start, end int, value string)) {
	m.ring[m.n&m.mask] = c
	m.n++
	lc := c
	if lc >= 'A' && lc <= 'Z' {
		lc += 'a' - 'A'
	}
	for i := range m.lits {
		l := &m.lits[i]
		if l.pendingEnd >= 0 {
			if !isWordByte(c) {
				report(l.pendingEnd-len(l.value), l.pendingEnd, l.value)
			}
			l.pendingEnd = -1
		}
		s := l.state
		if s == 0 && l.value[0] != lc {
			continue // the common case: no match under way, none begins
		}
		for s >= 0 && (s == len(l.value) || l.value[s] != lc) {
			s = l.fail[s]
		}
		s++
		l.state = s
		if s == len(l.value) {
			start := at + 1 - len(l.value)
			if l.edgeL && start > 0 && isWordByte(m.ring[(start-1)&m.mask]) {
				continue
			}
			if l.edgeR {
				l.pendingEnd = at + 1
			} else {
				report(start, at+1, l.value)
			}
		}
	}
}

// flush reports matches waiting for a right boundary at the end of text.
func (m *literalMatcher) flush(report func(start, end int, value string)) {
	for i := range m.lits {
		l := &m.lits[i]
		if l.pendingEnd >= 0 {
			report(l.pendingEnd-len(l.value), l.pendingEnd, l.value)
			l.pendingEnd = -1
		}
	}
}

// hold returns how many bytes back from the end a match could still be
// under way (the longest partial match), and the earliest pending start.
func (m *literalMatcher) hold(end int) int {
	h := end
	for i := range m.lits {
		l := &m.lits[i]
		if l.state > 0 && l.state < len(l.value) {
			h = min(h, end-l.state)
		}
		if l.pendingEnd >= 0 {
			h = min(h, l.pendingEnd-len(l.value))
		}
	}
	return h
}

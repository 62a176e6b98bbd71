// Package textnorm folds the obvious evasions out of text before the guard
// classifier sees it: Unicode compatibility forms, look-alike letters from
// other scripts, zero-width and other invisible characters, Unicode tag
// smuggling, case, diacritics, leetspeak and letter-by-letter spacing. It
// also finds base64-wrapped payloads so that they can be decoded and
// scored on their own.
//
// The folding is lossy on purpose: it maps many spellings of one word to
// one form, so that hashed n-gram features see "ІGN0RE prev¡ous" and
// "ignore previous" alike. It is deterministic and allocation-light; the
// classifier calls it on every input.
package textnorm

import (
	"encoding/base64"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// confusable maps letters from Cyrillic, Greek and a few other blocks that
// look like Latin letters to those letters. Hand-written (a subset of the
// Unicode TR39 confusables table, restricted to lower-case targets after
// folding) because the full table is large and this is the part that
// evasions use in practice.
var confusable = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'с': 'c', 'ԁ': 'd', 'е': 'e', 'ё': 'e', 'һ': 'h', 'і': 'i', 'ї': 'i', 'ј': 'j',
	'к': 'k', 'ӏ': 'l', 'м': 'm', 'н': 'h', 'о': 'o', 'р': 'p', 'ԛ': 'q', 'г': 'r', 'ѕ': 's', 'т': 't',
	'у': 'y', 'ѵ': 'v', 'ԝ': 'w', 'х': 'x', 'ү': 'y', 'з': '3', 'ь': 'b', 'п': 'n',
	// Greek
	'α': 'a', 'β': 'b', 'ε': 'e', 'η': 'n', 'ι': 'i', 'κ': 'k', 'ν': 'v', 'ο': 'o', 'ρ': 'p',
	'τ': 't', 'υ': 'u', 'χ': 'x', 'γ': 'y', 'ω': 'w', 'ς': 's', 'μ': 'u', 'ϲ': 'c', 'ϳ': 'j',
	// Latin extensions and others
	'ı': 'i', 'ȷ': 'j', 'ſ': 's', 'ɑ': 'a', 'ɡ': 'g', 'ɩ': 'i', 'ɪ': 'i', 'ʏ': 'y', 'ᴀ': 'a',
	'ʙ': 'b', 'ᴄ': 'c', 'ᴅ': 'd', 'ᴇ': 'e', 'ɢ': 'g', 'ʜ': 'h', 'ᴊ': 'j', 'ᴋ': 'k', 'ʟ': 'l',
	'ᴍ': 'm', 'ɴ': 'n', 'ᴏ': 'o', 'ᴘ': 'p', 'ʀ': 'r', 'ꜱ': 's', 'ᴛ': 't', 'ᴜ': 'u', 'ᴠ': 'v',
	'ᴡ': 'w', 'ᴢ': 'z', '¡': 'i',
}

// leet maps digits and symbols used as letters inside words.
var leet = map[rune]rune{
	'0': 'o', '1': 'i', '3': 'e', '4': 'a', '5': 's', '7': 't', '8': 'b', '9': 'g',
	'@': 'a', '$': 's', '!': 'i', '|': 'l', '+': 't', '€': 'e',
}

// invisible reports runes that render as nothing and are used to split
// words past filters: zero-width spaces and joiners, bidi controls, the
// BOM, soft hyphens, variation selectors and other format characters.
func invisible(r rune) bool { return Invisible(r) }

// Invisible reports runes that render as nothing (see invisible): the
// characters a reader cannot see but a tokenizer still reads.
func Invisible(r rune) bool {
	switch {
	case r == 0xAD, r == 0x34F, r == 0x180E, r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0:
		return true
	case r >= 0x200B && r <= 0x200F, r >= 0x202A && r <= 0x202E, r >= 0x2060 && r <= 0x206F:
		return true
	case r == 0xFEFF, r >= 0xFE00 && r <= 0xFE0F, r >= 0xE0100 && r <= 0xE01EF:
		return true
	}
	return unicode.Is(unicode.Cf, r)
}

// FoldRune maps one rune the way matching copies of text needs it: a
// look-alike letter from another script to its Latin letter, a full-width
// form or a Unicode tag character to its ASCII one, any letter to lower case, and an invisible
// character (zero-width, bidi control, variation selector) to -1 so
// that the caller drops it. Unlike Normalize it keeps digits as digits:
// a secret's "0" must not become "o".
func FoldRune(r rune) rune {
	if r < utf8.RuneSelf {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}
	if r >= 0xFF01 && r <= 0xFF5E { // full-width ASCII
		return FoldRune(r - 0xFEE0)
	}
	if r >= 0xE0020 && r <= 0xE007E { // a tag character smuggles ASCII
		return FoldRune(r - 0xE0000)
	}
	if r >= 0xE0000 && r <= 0xE007F || invisible(r) {
		return -1
	}
	l := unicode.ToLower(r)
	if c, ok := confusable[l]; ok {
		return c
	}
	return l
}

// Normalize returns the folded form of s: NFKC, invisible characters
// removed, Unicode tag characters decoded to the ASCII they smuggle,
// lower case, diacritics removed, look-alike letters mapped to Latin in
// words that mix scripts or consist only of look-alikes, leetspeak undone
// inside words that contain letters, whitespace collapsed to single
// spaces, and runs of three or more single letters separated by spaces
// ("i g n o r e") joined into one word.
func Normalize(s string) string {
	return string(appendFolded(make([]byte, 0, len(s)), s))
}

// AppendNormalize appends the folded form of s (see Normalize) to dst
// and returns the extended buffer, so that a caller that normalises many
// texts can reuse one.
func AppendNormalize(dst []byte, s string) []byte {
	return appendFolded(dst, s)
}

// normalize is Normalize; with fast, word by word (appendFolded), the
// way Normalize runs; without, the whole text through each step in turn,
// the reference the fast path is tested against.
func normalize(s string, fast bool) string {
	if fast {
		return string(appendFolded(nil, s))
	}
	return foldWords(mapRunes(s))
}

// mapRunes is the rune-by-rune part of normalize: tags decoded,
// invisibles dropped, NFKD, combining marks dropped, white space made
// ' ', lower case.
func mapRunes(s string) string {
	// Pass 1: tags and invisibles, before NFKC (which keeps them).
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case IsTag(r):
			if a, ok := TagASCII(r); ok { // tag characters smuggle ASCII
				b.WriteRune(a)
			}
		case invisible(r):
		default:
			b.WriteRune(r)
		}
	}
	// NFKD folds compatibility forms (full-width, mathematical letters,
	// ligatures) and splits off combining marks, which we drop.
	t := norm.NFKD.String(b.String())
	b.Reset()
	for _, r := range t {
		if unicode.Is(unicode.Mn, r) {
			continue
		}
		if unicode.IsSpace(r) {
			r = ' '
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// appendFolded appends the folded form of s to dst (the same result as
// the full path, normalize(s, false): FuzzNormalize compares them) in
// one pass over its words, without the per-word strings foldWords makes.
// Words are the runs between ASCII white space: an ASCII word is lowered
// and its leetspeak undone in place; a word with other runes takes the
// full path on its own (NFKD, like every step of it, works rune by rune
// or within runs of combining marks, which ASCII white space ends), so
// one accented name or copyright sign does not send a whole document
// through it.
func appendFolded(dst []byte, s string) []byte {
	// run holds a run of single-rune alphanumeric words, which are
	// joined when there are three or more ("i g n o r e").
	var runBuf [64]byte
	run, runN := runBuf[:0], 0
	sep := len(dst)
	space := func() {
		if len(dst) > sep {
			dst = append(dst, ' ')
		}
	}
	flushRun := func() {
		if runN >= 3 {
			space()
			dst = append(dst, run...)
		} else {
			for _, r := range string(run) {
				space()
				dst = utf8.AppendRune(dst, r)
			}
		}
		run, runN = run[:0], 0
	}
	for i := 0; i < len(s); {
		for i < len(s) && asciiSpace[s[i]] {
			i++
		}
		if i == len(s) {
			break
		}
		j, ascii := i, true
		for j < len(s) && !asciiSpace[s[j]] {
			ascii = ascii && s[j] < utf8.RuneSelf
			j++
		}
		switch {
		case j == i+1 && asciiAlnum[s[i]]:
			run = append(run, lowerByte(s[i]))
			runN++
		case ascii:
			flushRun()
			space()
			dst = appendFoldedASCII(dst, s[i:j])
		default:
			for _, w := range strings.Fields(mapRunes(s[i:j])) {
				w = foldWord(w)
				if utf8.RuneCountInString(w) == 1 && isAlnum(w) {
					run = append(run, w...)
					runN++
					continue
				}
				flushRun()
				space()
				dst = append(dst, w...)
			}
		}
		i = j
	}
	flushRun()
	return dst
}

// asciiSpace marks what unicode.IsSpace calls space below U+0080.
var asciiSpace = [256]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

// asciiAlnum marks ASCII letters and digits.
var asciiAlnum = func() (t [256]bool) {
	for c := '0'; c <= 'z'; c++ {
		t[c] = c <= '9' || c >= 'a' || c >= 'A' && c <= 'Z'
	}
	return t
}()

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func isLowerLetter(c byte) bool { return c >= 'a' && c <= 'z' }

// appendFoldedASCII appends the ASCII word w lower-cased, with leetspeak
// undone as foldWord does it.
func appendFoldedASCII(dst []byte, w string) []byte {
	start := len(dst)
	letters, hasLeet := false, false
	for i := 0; i < len(w); i++ {
		c := lowerByte(w[i])
		dst = append(dst, c)
		letters = letters || isLowerLetter(c)
		hasLeet = hasLeet || leetASCII[c]
	}
	if !letters || !hasLeet {
		return dst
	}
	// Decide on the lower-cased original (out), write the mapped bytes
	// into a copy: leetInside reads the word as it was.
	orig := dst[start:]
	var buf [64]byte
	rs := buf[:0]
	if len(orig) > len(buf) {
		rs = make([]byte, 0, len(orig))
	}
	rs = append(rs, orig...)
	for i, c := range rs {
		if leetASCII[c] && leetInsideASCII(rs, i) {
			orig[i] = byte(leet[rune(c)])
		}
	}
	return dst
}

// leetInsideASCII is leetInside for an ASCII word.
func leetInsideASCII(rs []byte, i int) bool {
	isL := func(j int) bool {
		if j < 0 || j >= len(rs) {
			return false
		}
		c := rs[j]
		return isLowerLetter(c) || c >= '0' && c <= '9' && leetASCII[c]
	}
	letter := func(j int) bool { return j >= 0 && j < len(rs) && isLowerLetter(rs[j]) }
	switch rs[i] {
	case '!', '|', '+', '$':
		return isL(i-1) && (isL(i+1) || (rs[i] == '$' && i == len(rs)-1 && i > 1))
	}
	return letter(i-1) || letter(i+1) || (isL(i-1) && isL(i+1))
}

// foldWords folds each space-separated word of s and joins spaced-out
// letters.
func foldWords(s string) string {
	words := strings.Fields(s)
	for i, w := range words {
		words[i] = foldWord(w)
	}
	return strings.Join(joinSpaced(words), " ")
}

// IsTag reports a Unicode tag character (U+E0000..U+E007F).
func IsTag(r rune) bool { return r >= 0xE0000 && r <= 0xE007F }

// TagASCII returns the printable ASCII character a tag character stands
// for (U+E0020..U+E007E), and false for the other tags.
func TagASCII(r rune) (rune, bool) {
	if r >= 0xE0020 && r <= 0xE007E {
		return r - 0xE0000, true
	}
	return 0, false
}

// leetASCII marks the ASCII runes leet maps.
var leetASCII = func() (t [utf8.RuneSelf]bool) {
	for r := range leet {
		if r < utf8.RuneSelf {
			t[r] = true
		}
	}
	return t
}()

// foldWord maps look-alikes and leetspeak inside one whitespace-free token.
func foldWord(w string) string {
	latin, other, allConf, letters := 0, 0, true, 0
	for _, r := range w {
		if !unicode.IsLetter(r) {
			continue
		}
		letters++
		if r < 0x250 {
			latin++
		} else {
			other++
		}
		if r >= 0x250 {
			if _, ok := confusable[r]; !ok {
				allConf = false
			}
		}
	}
	mapConf := other > 0 && (latin > 0 || allConf)
	hasLeet := false
	if letters > 0 {
		for _, r := range w {
			if r < utf8.RuneSelf {
				hasLeet = leetASCII[r] // no map lookup for ASCII
			} else {
				_, hasLeet = leet[r]
			}
			if hasLeet {
				break
			}
		}
	}
	if !mapConf && !hasLeet && !strings.ContainsRune(w, 'ı') {
		return w
	}
	out := make([]rune, 0, len(w))
	rs := []rune(w)
	for i, r := range rs {
		if c, ok := confusable[r]; ok && (mapConf || r < 0x250) {
			r = c
		}
		if l, ok := leet[r]; ok && hasLeet && leetInside(rs, i) {
			r = l
		}
		out = append(out, r)
	}
	return string(out)
}

// leetInside reports whether the symbol at i sits next to a letter (or
// another leet symbol that does), so "h3ll0" folds but a trailing "!" of
// a sentence or the "1" of "step 1" does not.
func leetInside(rs []rune, i int) bool {
	isL := func(j int) bool {
		if j < 0 || j >= len(rs) {
			return false
		}
		if unicode.IsLetter(rs[j]) {
			return true
		}
		_, ok := leet[rs[j]]
		return ok && unicode.IsDigit(rs[j])
	}
	if rs[i] == '!' || rs[i] == '|' || rs[i] == '+' || rs[i] == '$' {
		// Punctuation-like symbols only count with letters on both sides
		// (or a letter before and the word's end for '$').
		return isL(i-1) && (isL(i+1) || (rs[i] == '$' && i == len(rs)-1 && i > 1))
	}
	return (i > 0 && unicode.IsLetter(rs[i-1])) || (i+1 < len(rs) && unicode.IsLetter(rs[i+1])) ||
		(isL(i-1) && isL(i+1))
}

// joinSpaced joins runs of three or more single-rune alphanumeric tokens.
func joinSpaced(words []string) []string {
	out := words[:0:0]
	for i := 0; i < len(words); {
		j := i
		for j < len(words) && utf8.RuneCountInString(words[j]) == 1 && isAlnum(words[j]) {
			j++
		}
		if j-i >= 3 {
			out = append(out, strings.Join(words[i:j], ""))
			i = j
			continue
		}
		out = append(out, words[i])
		i++
	}
	return out
}

func isAlnum(w string) bool {
	r, _ := utf8.DecodeRuneInString(w)
	return unicode.IsLetter(r) || unicode.IsDigit(r)
}

// MinPayload is the shortest base64 run (in characters) that Payloads decodes.
const MinPayload = 16

// maxPayloads bounds the work Payloads does on hostile input.
const maxPayloads = 8

// Payloads finds base64 (standard or URL-safe, padded or not) runs of at
// least MinPayload characters in s and returns the decodings that look
// like text (valid UTF-8, mostly printable). At most 8 payloads are
// returned, in order of appearance.
func Payloads(s string) []string {
	var out []string
	i := 0
	for i < len(s) && len(out) < maxPayloads {
		if !isB64(s[i]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isB64(s[j]) {
			j++
		}
		run := s[i:j]
		i = j
		if len(run) < MinPayload || !hasMixedB64(run) {
			continue
		}
		if d, ok := decodeB64(run); ok {
			out = append(out, d)
		}
	}
	return out
}

func isB64(c byte) bool { return b64Byte[c] }

// b64Byte marks the bytes of standard and URL-safe base64 and its padding.
var b64Byte = func() (t [256]bool) {
	for c := range t {
		t[c] = c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' ||
			c == '+' || c == '/' || c == '-' || c == '_' || c == '='
	}
	return t
}()

// hasMixedB64 rejects runs that are plain words or numbers: real base64
// of text mixes upper case, lower case and (usually) digits.
func hasMixedB64(run string) bool {
	var up, lo bool
	for i := 0; i < len(run); i++ {
		c := run[i]
		up = up || c >= 'A' && c <= 'Z'
		lo = lo || c >= 'a' && c <= 'z'
	}
	return up && lo
}

func decodeB64(run string) (string, bool) { return DecodeBase64(run) }

// DecodeBase64 decodes one base64 run (standard or URL-safe, padded or
// not) and returns it when it looks like text: valid UTF-8, at least nine
// runes in ten printable.
func DecodeBase64(run string) (string, bool) {
	run = strings.TrimRight(run, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(run, "-_") {
		enc = base64.RawURLEncoding
	}
	// Drop trailing characters that cannot complete a quantum.
	if len(run)%4 == 1 {
		run = run[:len(run)-1]
	}
	d, err := enc.DecodeString(run)
	if err != nil || !utf8.Valid(d) {
		return "", false
	}
	printable := 0
	n := 0
	for _, r := range string(d) {
		n++
		if unicode.IsPrint(r) || unicode.IsSpace(r) {
			printable++
		}
	}
	if n == 0 || printable*10 < n*9 {
		return "", false
	}
	return string(d), true
}

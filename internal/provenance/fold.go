package provenance

import (
	"unicode"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/guard/textnorm"
)

// Fold appends to dst the matching form of s: letters and digits only,
// lower case, look-alike and full-width letters mapped to Latin (by
// textnorm.FoldRune), invisible characters, whitespace and punctuation
// dropped. "Tangerine!Ferry42", "t a n g e r i n e ferry 42" and the same
// with zero-width spaces or Cyrillic look-alikes between its letters all
// fold to "tangerineferry42". Bytes that are not valid UTF-8 are read one
// by one as Latin-1, so that decoded binary folds without a panic.
func Fold(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
				dst = append(dst, c)
			case c >= 'A' && c <= 'Z':
				dst = append(dst, c+('a'-'A'))
			}
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		if r == utf8.RuneError && n == 1 {
			continue
		}
		dst = foldRune(dst, r)
	}
	return dst
}

// foldBytes is Fold over bytes that may be any binary (a decoding at the
// wrong offset): only ASCII letters and digits are kept.
func foldBytes(dst, b []byte) []byte {
	for _, c := range b {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
			dst = append(dst, c)
		case c >= 'A' && c <= 'Z':
			dst = append(dst, c+('a'-'A'))
		}
	}
	return dst
}

func foldRune(dst []byte, r rune) []byte {
	f := textnorm.FoldRune(r)
	switch {
	case f < 0:
		return dst
	case f < utf8.RuneSelf:
		c := byte(f)
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			dst = append(dst, c)
		}
		return dst
	case unicode.IsLetter(f) || unicode.IsDigit(f):
		return utf8.AppendRune(dst, f)
	}
	return dst
}

// rot13 appends the ROT13 of a folded stream.
func rot13(dst, folded []byte) []byte {
	for _, c := range folded {
		if c >= 'a' && c <= 'z' {
			c = 'a' + (c-'a'+13)%26
		}
		dst = append(dst, c)
	}
	return dst
}

// unescapeURL appends s with its %XX escapes decoded and '+' read as a
// space; a '%' not followed by two hex digits stays as it is.
func unescapeURL(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && hexVal(s[i+1]) >= 0 && hexVal(s[i+2]) >= 0:
			dst = append(dst, byte(hexVal(s[i+1])<<4|hexVal(s[i+2])))
			i += 2
		case c == '+':
			dst = append(dst, ' ')
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// minEncoded is the shortest run of hex or base64 characters worth
// decoding: 12 characters carry 6 (hex) or 9 (base64) bytes, one gram.
const minEncoded = 12

// hexRuns calls f with each run of at least minEncoded hex digits in s.
func hexRuns(s []byte, f func(run []byte)) {
	for i := 0; i < len(s); {
		if hexVal(s[i]) < 0 {
			i++
			continue
		}
		j := i
		for j < len(s) && hexVal(s[j]) >= 0 {
			j++
		}
		if j-i >= minEncoded {
			f(s[i:j])
		}
		i = j
	}
}

// decodeHex appends the bytes run encodes from offset off (0 or 1).
func decodeHex(dst, run []byte, off int) []byte {
	for i := off; i+1 < len(run); i += 2 {
		dst = append(dst, byte(hexVal(run[i])<<4|hexVal(run[i+1])))
	}
	return dst
}

// b64Val is the value of a base64 digit in either alphabet (standard or
// URL-safe), or -1.
func b64Val(c byte) int {
	switch {
	case c >= 'A' && c <= 'Z':
		return int(c - 'A')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 26
	case c >= '0' && c <= '9':
		return int(c-'0') + 52
	case c == '+' || c == '-':
		return 62
	case c == '/' || c == '_':
		return 63
	}
	return -1
}

// b64Runs calls f with each run of at least minEncoded base64 digits in
// s that mixes upper and lower case (plain words and numbers do not).
func b64Runs(s []byte, f func(run []byte)) {
	for i := 0; i < len(s); {
		if b64Val(s[i]) < 0 {
			i++
			continue
		}
		j := i
		up, lo := false, false
		for j < len(s) && b64Val(s[j]) >= 0 {
			up = up || s[j] >= 'A' && s[j] <= 'Z'
			lo = lo || s[j] >= 'a' && s[j] <= 'z'
			j++
		}
		if j-i >= minEncoded && up && lo {
			f(s[i:j])
		}
		i = j
	}
}

// decodeB64 appends the bytes run encodes when its first quantum starts
// at off (0 to 3): an encoded secret may begin anywhere in a longer run.
func decodeB64(dst, run []byte, off int) []byte {
	var acc uint32
	n := 0
	for i := off; i < len(run); i++ {
		acc = acc<<6 | uint32(b64Val(run[i]))
		n++
		if n == 4 {
			dst = append(dst, byte(acc>>16), byte(acc>>8), byte(acc))
			acc, n = 0, 0
		}
	}
	switch n {
	case 2:
		dst = append(dst, byte(acc>>4))
	case 3:
		dst = append(dst, byte(acc>>10), byte(acc>>2))
	}
	return dst
}

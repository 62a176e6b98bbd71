package gateway

import (
	"bytes"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// validUTF8 returns the upstream payload p with what would not decode as
// UTF-8 replaced by U+FFFD: invalid byte sequences, and JSON escapes of
// lone UTF-16 surrogates (\ud800 without its pair), which strict decoders
// refuse. The first repair of a response adds one finding to its
// verdict; the verdict itself is unchanged.
func (x *exchange) validUTF8(p []byte) []byte {
	fixed := false
	if !utf8.Valid(p) {
		p, fixed = bytes.ToValidUTF8(p, []byte("\uFFFD")), true
	}
	if q, ok := replaceLoneSurrogates(p); ok {
		p, fixed = q, true
	}
	if fixed && !x.tally.utf8Noted {
		x.tally.utf8Noted = true
		x.tally.notes = append(x.tally.notes, validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError, Start: len(x.out.text), End: len(x.out.text),
			Message: "the upstream sent text that is not valid UTF-8; Aegis replaced it with U+FFFD"})
	}
	return p
}

// needsRepair reports whether validUTF8 would change b.
func needsRepair(b []byte) bool {
	if !utf8.Valid(b) {
		return true
	}
	_, lone := replaceLoneSurrogates(b)
	return lone
}

// unvetted returns the bytes of the parsed payload that no earlier payload
// of the stream vetted: its text when the scanner read the rest from the
// last payload it read in full (whose bytes were vetted, or repaired and
// read again), else all of it.
func (c *chunk) unvetted() []byte {
	if c.memo.Reused() {
		return c.f.Text.Of(c.p)
	}
	return c.p
}

// replaceLoneSurrogates rewrites every \uD800-\uDFFF escape in the JSON
// text p that is not part of a high-low pair as \ufffd (same length). It
// returns p unchanged and false when there is none.
func replaceLoneSurrogates(p []byte) ([]byte, bool) {
	if !bytes.Contains(p, []byte(`\u`)) {
		return p, false
	}
	var out []byte
	for i := 0; i+1 < len(p); i++ {
		if p[i] != '\\' {
			continue
		}
		if p[i+1] != 'u' {
			i++ // another escape: skip its character
			continue
		}
		r, ok := hex4(p, i+2)
		if !ok {
			continue
		}
		switch {
		case r >= 0xD800 && r < 0xDC00:
			if i+12 <= len(p) && p[i+6] == '\\' && p[i+7] == 'u' {
				if lo, ok := hex4(p, i+8); ok && lo >= 0xDC00 && lo < 0xE000 {
					i += 11 // a valid pair
					continue
				}
			}
		case r >= 0xDC00 && r < 0xE000:
		default:
			i += 5
			continue
		}
		if out == nil {
			out = append([]byte(nil), p...)
		}
		copy(out[i:], `\ufffd`)
		i += 5
	}
	if out == nil {
		return p, false
	}
	return out, true
}

// hex4 decodes the four hex digits at p[i:i+4].
func hex4(p []byte, i int) (rune, bool) {
	if i+4 > len(p) {
		return 0, false
	}
	var r rune
	for _, c := range p[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

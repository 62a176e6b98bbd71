package reveal

import (
	"strings"
	"unicode/utf8"
)

// maxSequence bounds one escape sequence; a longer one is ended there, so
// hostile input costs linear time and hides at most this much text.
const maxSequence = 4096

// StripANSI removes terminal escape sequences (ECMA-48: CSI, OSC, DCS,
// SOS, PM and APC strings, two-byte escapes, and their 8-bit C1 forms
// written as UTF-8) from s and returns the text and how many sequences it
// removed. Text inside an OSC hyperlink stays; the sequence is what a
// terminal hides or acts on. A sequence cut off at the end of s is
// removed to the end.
//
// It is written here rather than taken from a terminal library: the job
// is sixty lines, and the libraries that do it bring a renderer along.
func StripANSI(s string) (string, int) {
	if !strings.Contains(s, "\x1b") && !strings.Contains(s, "\u009b") && !strings.Contains(s, "\u009d") &&
		!strings.Contains(s, "\u0090") && !strings.Contains(s, "\u0098") && !strings.Contains(s, "\u009e") && !strings.Contains(s, "\u009f") {
		return s, 0
	}
	var b strings.Builder
	b.Grow(len(s))
	n := 0
	for i := 0; i < len(s); {
		intro, w := introducer(s[i:])
		if w == 0 {
			b.WriteByte(s[i])
			i++
			continue
		}
		n++
		i += w
		switch intro {
		case '[': // CSI: parameters and intermediates 0x20-0x3F, final 0x40-0x7E
			i = skipCSI(s, i)
		case ']', 'P', 'X', '^', '_': // strings ended by ST (ESC \, U+009C) or BEL (OSC)
			i = skipString(s, i, intro == ']')
		default: // a two-byte escape: its final byte is already consumed
		}
	}
	return b.String(), n
}

// introducer recognises the start of a sequence at the head of s: ESC
// followed by its second byte, or a C1 control in UTF-8. It returns the
// kind ('[' CSI, ']' OSC, 'P' DCS, 'X' SOS, '^' PM, '_' APC, or another
// byte for a two-byte escape) and its width; width 0 when none starts.
func introducer(s string) (byte, int) {
	switch {
	case s[0] == 0x1b:
		if len(s) == 1 {
			return 0x1b, 1
		}
		c := s[1]
		if c >= 0x20 && c <= 0x2F { // nF escape: intermediates then a final byte
			j := 2
			for j < len(s) && j < maxSequence && s[j] >= 0x20 && s[j] <= 0x2F {
				j++
			}
			if j < len(s) && s[j] >= 0x30 && s[j] <= 0x7E {
				j++
			}
			return ' ', j
		}
		if c >= 0x30 && c <= 0x7E {
			return c, 2
		}
		return 0x1b, 1 // a lone ESC
	case s[0] == 0xC2 && len(s) > 1:
		switch s[1] {
		case 0x9B:
			return '[', 2
		case 0x9D:
			return ']', 2
		case 0x90:
			return 'P', 2
		case 0x98:
			return 'X', 2
		case 0x9E:
			return '^', 2
		case 0x9F:
			return '_', 2
		}
	}
	return 0, 0
}

func skipCSI(s string, i int) int {
	start := i
	for i < len(s) && i-start < maxSequence {
		c := s[i]
		i++
		if c >= 0x40 && c <= 0x7E {
			return i
		}
		if c < 0x20 || c > 0x3F { // not a CSI byte: the sequence is broken, keep what follows
			return i - 1
		}
	}
	return i
}

func skipString(s string, i int, bel bool) int {
	start := i
	for i < len(s) && i-start < maxSequence {
		switch {
		case bel && s[i] == 0x07:
			return i + 1
		case s[i] == 0x1b && i+1 < len(s) && s[i+1] == '\\':
			return i + 2
		case s[i] == 0xC2 && i+1 < len(s) && s[i+1] == 0x9C:
			return i + 2
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return i
}

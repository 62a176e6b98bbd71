// Package reveal shows text as a model will read it rather than as a
// person sees it: terminal escape sequences (ANSI) are removed, Unicode
// tag characters are decoded to the ASCII they smuggle, bidirectional
// controls and runs of zero-width characters are dropped, and base64
// blobs are decoded when they hold text. Screens judge the revealed text;
// proxies forward the cleaned text.
//
// The character classes come from internal/guard/textnorm, which folds
// the same evasions for the classifier; this package keeps what was
// hidden apart from what was visible, so a caller can both clean the text
// and name what it found.
package reveal

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/aegis-sentinel/aegis/internal/guard/textnorm"
)

// Kind is one way of hiding text from a reader.
type Kind int

// The kinds of hidden text.
const (
	ANSI      Kind = iota // terminal escape sequences
	Tags                  // Unicode tag characters (U+E0000..U+E007F)
	Bidi                  // bidirectional overrides and isolates
	ZeroWidth             // zero-width and other invisible format characters
	numKinds
)

func (k Kind) String() string {
	switch k {
	case ANSI:
		return "ANSI escapes"
	case Tags:
		return "Unicode tag characters"
	case Bidi:
		return "bidirectional overrides"
	case ZeroWidth:
		return "zero-width characters"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Report is what Text found in one string.
type Report struct {
	// Clean is the text without escapes, tags, bidi controls or invisible
	// characters: what a person sees.
	Clean string
	// Hidden is the ASCII the tag characters spelled, each run on a line
	// of its own: text the model reads and a person does not.
	Hidden string
	// Count is how many characters (escape sequences for ANSI) of each
	// kind were removed.
	Count [numKinds]int
}

// Changed reports whether anything was removed.
func (r Report) Changed() bool {
	for _, n := range r.Count {
		if n > 0 {
			return true
		}
	}
	return false
}

// Found lists the kinds removed, in order.
func (r Report) Found() []Kind {
	var out []Kind
	for k, n := range r.Count {
		if n > 0 {
			out = append(out, Kind(k))
		}
	}
	return out
}

// Judged is the text a screen should read: the visible text and, after
// it, what was hidden.
func (r Report) Judged() string {
	if r.Hidden == "" {
		return r.Clean
	}
	return r.Clean + "\n" + r.Hidden
}

// isBidi reports the bidirectional embedding, override and isolate
// controls (the marks LRM/RLM/ALM are counted as zero-width).
func isBidi(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069
}

// Text reveals s. Invalid UTF-8 bytes become U+FFFD, so removing a
// character can never join the bytes around it into a new one.
func Text(s string) Report {
	var rep Report
	if !maybeHidden(s) {
		rep.Clean = s
		return rep
	}
	clean, n := StripANSI(s)
	rep.Count[ANSI] = n
	var b, hidden strings.Builder
	b.Grow(len(clean))
	inTags := false
	for i := 0; i < len(clean); {
		r, w := utf8.DecodeRuneInString(clean[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			b.WriteRune(utf8.RuneError)
		case textnorm.IsTag(r):
			rep.Count[Tags]++
			if a, ok := textnorm.TagASCII(r); ok {
				if !inTags && hidden.Len() > 0 {
					hidden.WriteByte('\n')
				}
				hidden.WriteRune(a)
				inTags = true
			}
			i += w
			continue
		case isBidi(r):
			rep.Count[Bidi]++
		case textnorm.Invisible(r) && !keepInvisible(r):
			rep.Count[ZeroWidth]++
		default:
			b.WriteRune(r)
		}
		inTags = false
		i += w
	}
	rep.Clean, rep.Hidden = b.String(), hidden.String()
	return rep
}

// keepInvisible keeps the format characters that belong to ordinary
// text: the zero-width joiner inside emoji sequences and scripts that
// need it, the soft hyphen, and variation selectors.
func keepInvisible(r rune) bool {
	return r == 0x200D || r == 0xAD || r >= 0xFE00 && r <= 0xFE0F
}

// maybeHidden is a fast check: ASCII text without ESC hides nothing.
func maybeHidden(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == 0x1b || c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}

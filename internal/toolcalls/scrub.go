package toolcalls

import (
	"strings"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// scrubRun is the shortest stretch of a message, shared with a call's
// arguments, that Scrub removes: long enough that the words a message is
// made of ("the system prompt") do not trip it, short enough that no key
// survives whole.
const scrubRun = 8

// maxScrubbed caps the argument bytes a message is compared with.
const maxScrubbed = 64 << 10

// Scrubber takes a call's argument bytes out of the messages about it:
// every value of the arguments quoted whole ("…" for "value"), and every
// stretch of at least eight bytes that a value (or the raw text, when it
// is not JSON) also holds, each replaced by "…". Findings over tool calls
// pass through it, so that an error message, incident, event or log line
// names the path and the rule, never what the call carried.
//
// A Scrubber reads the arguments and collects their eight-byte stretches
// once, so that each message costs a pass over its own bytes, not a
// search of the arguments at each of them.
type Scrubber struct {
	quoted []string            // every value quoted three ways
	hay    []string            // what a stretch is looked for in
	grams  map[uint64]struct{} // the scrubRun-byte stretches of hay, packed
}

// NewScrubber prepares to scrub messages about args; read, when not nil,
// is args as Read read them.
func NewScrubber(args string, read *validator.ReadArgs) *Scrubber {
	if len(args) > maxScrubbed {
		args = args[:maxScrubbed]
		read = nil
	}
	if read == nil || read.Arguments != args {
		read = Read(args)
	}
	s := &Scrubber{}
	for _, v := range read.Values {
		if len(v.Text) == 0 || len(v.Text) > maxScrubbed {
			continue
		}
		s.quoted = append(s.quoted, `"`+v.Text+`"`, "'"+v.Text+"'", "`"+v.Text+"`")
	}
	// The stretches are looked for in the values (the keys are the
	// schema's words), or in the raw text when it is not JSON.
	if read.Valid {
		for _, v := range read.Values {
			if len(v.Text) >= scrubRun {
				s.hay = append(s.hay, v.Text)
			}
		}
	} else if args != "" {
		s.hay = []string{args}
	}
	n := 0
	for _, h := range s.hay {
		n += len(h) - scrubRun + 1
	}
	s.grams = make(map[uint64]struct{}, n)
	for _, h := range s.hay {
		for i := 0; i+scrubRun <= len(h); i++ {
			s.grams[pack8(h[i:])] = struct{}{}
		}
	}
	return s
}

// Scrub returns msg with the arguments' bytes taken out.
func (s *Scrubber) Scrub(msg string) string {
	if msg == "" || len(s.quoted) == 0 && len(s.hay) == 0 {
		return msg
	}
	for _, q := range s.quoted {
		if len(q) <= len(msg) && strings.Contains(msg, q) {
			msg = strings.ReplaceAll(msg, q, q[:1]+"…"+q[len(q)-1:])
		}
	}
	var b strings.Builder
	changed := false
	for i := 0; i < len(msg); {
		n := 0
		// The gram set says which stretches no value can hold; the
		// values are searched only for the others.
		if i+scrubRun <= len(msg) && s.hasGram(msg[i:]) && s.shared(msg[i:i+scrubRun]) {
			n = scrubRun
			for i+n < len(msg) && s.shared(msg[i:i+n+1]) {
				n++
			}
		}
		if n == 0 {
			if changed {
				b.WriteByte(msg[i])
			}
			i++
			continue
		}
		if !changed {
			b.Grow(len(msg))
			b.WriteString(msg[:i])
			changed = true
		}
		b.WriteString("…")
		i += n
	}
	if !changed {
		return msg
	}
	return b.String()
}

func (s *Scrubber) hasGram(p string) bool {
	_, ok := s.grams[pack8(p)]
	return ok
}

func (s *Scrubber) shared(part string) bool {
	for _, h := range s.hay {
		if strings.Contains(h, part) {
			return true
		}
	}
	return false
}

// pack8 packs the eight bytes of s into a uint64.
func pack8(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

package toolcalls

import (
	"encoding/binary"
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
	quoted []string // every value quoted three ways
	hay    []string // what a stretch is looked for in
	grams  gramSet  // the scrubRun-byte stretches of hay
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
	s.grams.init(n)
	for _, h := range s.hay {
		for i := 0; i+scrubRun <= len(h); i++ {
			s.grams.add(binary.LittleEndian.Uint64([]byte(h[i : i+scrubRun])))
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
		if i+scrubRun <= len(msg) && s.grams.has(binary.LittleEndian.Uint64([]byte(msg[i:i+scrubRun]))) && s.shared(msg[i:i+scrubRun]) {
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

func (s *Scrubber) shared(part string) bool {
	for _, h := range s.hay {
		if strings.Contains(h, part) {
			return true
		}
	}
	return false
}

// gramSet is a set of eight-byte stretches, each packed into a uint64,
// with open addressing (a map costs several times as much to fill).
type gramSet struct {
	slots []uint64
	zero  bool // eight NUL bytes, which a free slot cannot stand for
}

func (g *gramSet) init(n int) {
	size := 16
	for size < 2*n {
		size <<= 1
	}
	g.slots = make([]uint64, size)
}

func (g *gramSet) slot(k uint64) *uint64 {
	mask := uint64(len(g.slots) - 1)
	i := k * 0x9E3779B97F4A7C15 >> 32 & mask
	for g.slots[i] != k && g.slots[i] != 0 {
		i = (i + 1) & mask
	}
	return &g.slots[i]
}

func (g *gramSet) add(k uint64) {
	if k == 0 {
		g.zero = true
		return
	}
	*g.slot(k) = k
}

func (g *gramSet) has(k uint64) bool {
	if k == 0 {
		return g.zero
	}
	return *g.slot(k) == k
}

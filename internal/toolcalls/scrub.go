package toolcalls

import "strings"

// scrubRun is the shortest stretch of a message, shared with a call's
// arguments, that Scrub removes: long enough that the words a message is
// made of ("the system prompt") do not trip it, short enough that no key
// survives whole.
const scrubRun = 8

// maxScrubbed caps the argument bytes a message is compared with.
const maxScrubbed = 64 << 10

// Scrub returns msg with the bytes of args taken out: every value of the
// arguments quoted whole ("…" for "value"), and every stretch of at least
// eight bytes that a value (or the raw text, when it is not JSON) also
// holds, each replaced by "…".
// Findings over tool calls pass through it, so that an error message,
// incident, event or log line names the path and the rule, never what
// the call carried.
func Scrub(msg, args string) string {
	if msg == "" || args == "" {
		return msg
	}
	if len(args) > maxScrubbed {
		args = args[:maxScrubbed]
	}
	read := Read(args)
	for _, v := range read.Values {
		if len(v.Text) == 0 || len(v.Text) > maxScrubbed {
			continue
		}
		for _, q := range [...]string{`"` + v.Text + `"`, "'" + v.Text + "'", "`" + v.Text + "`"} {
			if strings.Contains(msg, q) {
				msg = strings.ReplaceAll(msg, q, q[:1]+"…"+q[len(q)-1:])
			}
		}
	}
	// The stretches are looked for in the values (the keys are the
	// schema's words), or in the raw text when it is not JSON.
	var hay []string
	if read.Valid {
		for _, v := range read.Values {
			if len(v.Text) >= scrubRun {
				hay = append(hay, v.Text)
			}
		}
	} else {
		hay = []string{args}
	}
	shared := func(s string) bool {
		for _, h := range hay {
			if strings.Contains(h, s) {
				return true
			}
		}
		return false
	}
	var b strings.Builder
	changed := false
	for i := 0; i < len(msg); {
		n := 0
		if i+scrubRun <= len(msg) && shared(msg[i:i+scrubRun]) {
			n = scrubRun
			for i+n < len(msg) && shared(msg[i:i+n+1]) {
				n++
			}
		}
		if n == 0 {
			b.WriteByte(msg[i])
			i++
			continue
		}
		b.WriteString("…")
		i += n
		changed = true
	}
	if !changed {
		return msg
	}
	return b.String()
}

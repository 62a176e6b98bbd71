package toolcalls

import (
	"strings"
	"testing"
)

// scrubCases are TestScrub's cases and FuzzScrub's seeds.
var scrubCases = []struct{ name, msg, args, want string }{
	{"a quoted value", `value "urgent" is not one of enum ["low","high"]`, `{"priority":"urgent"}`, `value "…" is not one of enum ["low","high"]`},
	{"a long stretch", "credential in output: AKIA2E3ZQF7B2LMC4XRW here", `{"body":"key AKIA2E3ZQF7B2LMC4XRW"}`, "credential in output:… here"},
	{"eight shared bytes go even when they are words", "`body` carries 31 bytes of the system prompt", `{"body":"about the system prompt"}`, "`body` carries 31 bytes of…"},
	{"keys stay", `at "/level": value "…" is not one of enum`, `{"level": "urgent-zorblax"}`, `at "/level": value "…" is not one of enum`},
	{"nothing shared", "call to `send_email` sends to a destination nobody named", `{"to":"x@evil.example"}`, "call to `send_email` sends to a destination nobody named"},
	{"arguments that are not JSON", "not JSON near zorblaxquux", `{"a": zorblaxquux`, "not JSON near…"},
	{"a run of NUL bytes", "\x00\x00\x00\x00\x00\x00\x00\x00\x00", "\x00\x00\x00\x00\x00\x00\x00\x00\x00", "…"},
	{"empty", "", `{"a":"b"}`, ""},
}

func TestScrub(t *testing.T) {
	for _, c := range scrubCases {
		t.Run(c.name, func(t *testing.T) {
			if got := NewScrubber(c.args, nil).Scrub(c.msg); got != c.want {
				t.Errorf("Scrub = %q, want %q", got, c.want)
			}
		})
	}
}

// referenceScrub is Scrubber.Scrub without the gram set: each position
// of the message searched for in the values. The fuzz test holds the two
// together.
func referenceScrub(msg, args string) string {
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
			msg = strings.ReplaceAll(msg, q, q[:1]+"…"+q[len(q)-1:])
		}
	}
	hay := []string{args}
	if read.Valid {
		hay = nil
		for _, v := range read.Values {
			if len(v.Text) >= scrubRun {
				hay = append(hay, v.Text)
			}
		}
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
	for i := 0; i < len(msg); {
		n := 0
		if i+scrubRun <= len(msg) && shared(msg[i:i+scrubRun]) {
			for n = scrubRun; i+n < len(msg) && shared(msg[i:i+n+1]); n++ {
			}
		}
		if n == 0 {
			b.WriteByte(msg[i])
			i++
			continue
		}
		b.WriteString("…")
		i += n
	}
	return b.String()
}

// TestScrubberManyMessages scrubs several messages with one Scrubber, as
// the pipeline does for a call's findings, a run of NUL bytes among them.
func TestScrubberManyMessages(t *testing.T) {
	args := `{"body":"key AKIA2E3ZQF7B2LMC4XRW and \u0000\u0000\u0000\u0000\u0000\u0000\u0000\u0000 end","to":["x@evil.example"]}`
	s := NewScrubber(args, Read(args))
	for _, msg := range []string{
		"credential in output: AKIA2E3ZQF7B2LMC4XRW here",
		"nul run: \x00\x00\x00\x00\x00\x00\x00\x00 here",
		`value "x@evil.example" is not allowed`,
		"nothing of the call here",
		"",
	} {
		if got, want := s.Scrub(msg), referenceScrub(msg, args); got != want {
			t.Errorf("Scrub(%q) = %q, want %q", msg, got, want)
		}
	}
}

func FuzzScrub(f *testing.F) {
	for _, c := range scrubCases {
		f.Add(c.msg, c.args)
	}
	f.Fuzz(func(t *testing.T, msg, args string) {
		if got, want := NewScrubber(args, nil).Scrub(msg), referenceScrub(msg, args); got != want {
			t.Fatalf("Scrub(%q, %q) = %q, want %q", msg, args, got, want)
		}
	})
}

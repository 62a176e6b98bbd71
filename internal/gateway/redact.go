package gateway

import (
	"strings"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Redacted replaces quoted text in what Aegis records when the policy
// does not allow logging text (log_text: false).
const Redacted = "[redacted]"

// publish sends e to the event bus (and so to the incident log, the
// request log, the dashboard and metrics). Unless the policy sets
// log_text, the quoted text inside finding messages and errors (an
// output span a rule matched, an upstream's error body) is replaced, so
// no prompt, output or upstream text reaches anything that stores
// events. The client's own answer keeps the full messages.
func (g *Gateway) publish(e events.Event, logText bool) events.Event {
	if !logText {
		redactEvent(&e)
	}
	g.Events.Publish(e)
	return e
}

// clip returns at most n bytes of b.
func clip(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func redactEvent(e *events.Event) {
	e.Error = RedactQuotes(e.Error)
	if e.Verdict == nil || len(e.Verdict.Findings) == 0 {
		return
	}
	v := *e.Verdict
	v.Findings = append([]validator.Finding(nil), v.Findings...)
	for i := range v.Findings {
		v.Findings[i].Message = RedactQuotes(v.Findings[i].Message)
	}
	e.Verdict = &v
}

// RedactQuotes replaces the content of every quoted span in s, "double"
// (with backslash escapes, as Go's %q and JSON write them), 'single'
// (opening after a non-letter, so an apostrophe is not a quote) or
// `back`, with Redacted. An unterminated quote redacts to the end.
func RedactQuotes(s string) string {
	if !strings.ContainsAny(s, "\"'`") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '"' && c != '`' && (c != '\'' || i > 0 && isWordByte(s[i-1])) {
			b.WriteByte(c)
			continue
		}
		end := closingQuote(s, i+1, c)
		b.WriteByte(c)
		b.WriteString(Redacted)
		if end < len(s) {
			b.WriteByte(c)
		}
		i = end
	}
	return b.String()
}

// closingQuote returns the index of the quote q closing a span that
// starts at i, or len(s).
func closingQuote(s string, i int, q byte) int {
	for ; i < len(s); i++ {
		switch {
		case s[i] == '\\' && q != '`':
			i++
		case s[i] == q:
			return i
		}
	}
	return len(s)
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

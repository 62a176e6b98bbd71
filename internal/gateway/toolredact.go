package gateway

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/guard"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// redactToolResults forwards the request with the content of each message an input
// finding names (messages/N, a tool result the policy redacts) replaced
// by a notice, and notes each redaction in the verdict.
func (x *exchange) redactToolResults(fs []validator.Finding) {
	var msgs []json.RawMessage
	if json.Unmarshal(x.req.body["messages"], &msgs) != nil {
		return
	}
	changed := false
	for _, f := range fs {
		if f.Reason != validator.ReasonPromptInjection {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(f.Path, "messages/"))
		if err != nil || !strings.HasPrefix(f.Path, "messages/") || n < 0 || n >= len(msgs) {
			continue
		}
		var m rawBody
		if json.Unmarshal(msgs[n], &m) != nil || m == nil {
			continue
		}
		m.set("content", guard.RedactedNotice)
		msgs[n] = m.encode()
		if n < len(x.req.vreq.Messages) {
			x.req.vreq.Messages[n].Content = guard.RedactedNotice
		}
		changed = true
		note := f
		note.Reason = validator.ReasonNone
		note.Message = "redacted: " + f.Message
		x.tally.notes = append(x.tally.notes, note)
	}
	if changed {
		x.req.body.set("messages", msgs)
		x.req.raw = nil
	}
}

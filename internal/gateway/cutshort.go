package gateway

import "github.com/aegis-sentinel/aegis/internal/validator"

// The client's own token budget. An upstream that stops at the request's
// max_tokens (finish_reason "length", Ollama's done_reason "length") may
// leave output that a check fails only because it stops there: JSON with
// containers still open, a schema's required member not yet written. A
// hidden retry has the same budget (less, when it continues released
// text) and ends the same way, so such an attempt is not retried: the
// request halts at once, and the message says the budget was the cause.

// cutShort reports whether the failed verdict v is explained by the
// upstream stopping at the client's token budget: it finished with
// "length" and the failing finding lies at the end of the output.
func (x *exchange) cutShort(v validator.Verdict) bool {
	if x.cur.finish != "length" || v.Verdict != validator.Fail {
		return false
	}
	for _, f := range v.Findings {
		if f.Reason == v.Reason && f.Start >= len(x.out.text) {
			return true
		}
	}
	return false
}

// explainCutShort returns v with its failing findings saying that the
// output reached max_tokens, when cutShort(v); else v unchanged.
func (x *exchange) explainCutShort(v validator.Verdict) validator.Verdict {
	if !x.cutShort(v) {
		return v
	}
	fs := append([]validator.Finding(nil), v.Findings...)
	for i, f := range fs {
		if f.Reason == v.Reason && f.Start >= len(x.out.text) {
			fs[i].Message = "the output stopped at the request's max_tokens (finish_reason \"length\") before it was complete; " +
				"raise max_tokens: " + f.Message
		}
	}
	v.Findings = fs
	return v
}

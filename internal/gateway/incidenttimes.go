package gateway

import (
	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// incidentTimed is timed for the events the incident log records (a
// Retry or a Halt). An incident is about the attempt that failed, so where
// the client received nothing (the text was held) its TTFT is the
// upstream's first token, and its tokens are the attempt's: the upstream's
// own count when its closing chunks gave one, else the text chunks read
// (llama-server and Ollama stream one token per chunk). The request's end
// (RequestFinished) keeps timed's client-side figures for the metrics.
func (x *exchange) incidentTimed(e events.Event) events.Event {
	e = x.timed(e)
	if e.TTFT == 0 && !x.tally.firstUp.IsZero() {
		e.TTFT = x.tally.firstUp.Sub(x.start)
	}
	e.Tokens = x.completionTokens()
	if e.Tokens == 0 {
		e.Tokens = len(x.out.tokens)
	}
	return e
}

// retriedAs is v as the hidden retry that follows it carries it out: a
// fix_syntax hint the local fix could not apply (a tool call's arguments,
// a document the fix did not mend) is carried out as an upstream retry
// with JSON-constrained decoding, and the incident says so.
func retriedAs(v validator.Verdict) validator.Verdict {
	if v.Action == validator.ActionFixSyntax {
		v.Action = validator.ActionRetryStricterFormat
	}
	return v
}

// timed adds the request's timings so far to e (a Retry, a Halt, the
// request's end): the incident log records a hidden retry with what the
// request had cost when it was retried.
func (x *exchange) timed(e events.Event) events.Event {
	now := x.g.now()
	e.Duration = now.Sub(x.start)
	e.HeldBytes = x.out.heldMax
	if !x.out.firstOut.IsZero() {
		e.TTFT = x.out.firstOut.Sub(x.start)
		if !x.tally.firstUp.IsZero() {
			e.AddedTTFT = x.out.firstOut.Sub(x.tally.firstUp)
		}
	}
	if !x.tally.lastUp.IsZero() {
		e.VerdictDelay = now.Sub(x.tally.lastUp)
	}
	return e
}

// completionTokens reads the upstream's count of generated tokens from
// the closing chunks: usage.completion_tokens, llama-server's
// timings.predicted_n, or Ollama's eval_count. Zero when none says.
func (x *exchange) completionTokens() int {
	n := 0
	var c chunkscan.Counts
	for _, p := range x.cur.tail {
		if chunkscan.ReadCounts(p, &c) != nil {
			continue
		}
		switch {
		case c.Usage > 0:
			n = int(c.Usage)
		case c.Predicted > 0:
			n = int(c.Predicted)
		case c.Eval > 0:
			n = int(c.Eval)
		}
	}
	return n
}

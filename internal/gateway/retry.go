package gateway

import (
	"encoding/json"

	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// firstBody is the request as the client sent it, switched to streaming:
// Aegis always reads the upstream as a stream (a non-streaming client gets
// the assembled body), and asks for usage in the stream when the client
// did not stream. A streaming request the gateway did not change goes
// as it came: encoding its members again would cost a large agent
// request tens of microseconds before the upstream has it.
func (x *exchange) firstBody() []byte {
	if x.req.raw != nil && x.req.stream && string(x.req.body["stream"]) == "true" {
		return x.req.raw
	}
	b := x.req.body.clone()
	x.route.streamBody(b, x.req.stream)
	return b.encode()
}

// Corrections added to a retried request, per reason. They restate what
// was violated; the sampling and format changes do the real work.
const (
	correctionJSON   = "Reply with one valid JSON document and nothing else: no prose, no code fences."
	correctionLoop   = "Do not repeat what you have already written. Continue with new content, or finish."
	correctionPrefix = "Your previous answer broke this requirement: "
	correctionTool   = "Call only the tools declared, with arguments that are one JSON object fitting the tool's parameters and the rules below."
)

// corrected builds the request of the next attempt after verdict v:
//
//   - invalid_json, schema_violation, malformed_tool_call: constrained
//     decoding. The schema (from response_format, else a JSON object)
//     goes to llama-server and OpenAI-compatible servers as
//     response_format json_schema / json_object, to Ollama as "format".
//   - repetition_loop: anti-repetition sampling. llama-server gets DRY
//     (dry_multiplier 0.8, dry_base 1.75, dry_allowed_length 2) and
//     repeat_penalty 1.15 over the last 256 tokens; Ollama gets
//     repeat_penalty and repeat_last_n in options; other servers
//     frequency_penalty and presence_penalty.
//   - every reason: a system note restating the violated requirement.
//
// When text was already released, the request continues it: the released
// prefix becomes an assistant prefill (chat) or is appended to the prompt
// (completions), so the client's answer reads as one, and the token limit
// is lowered by the tokens already released.
func (x *exchange) corrected(v validator.Verdict) []byte {
	x.out.carryTokens()
	b := x.req.body.clone()
	x.shrinkBudget(b)
	x.route.streamBody(b, x.req.stream)
	kind := x.up.Kind
	note := correctionPrefix + findingMessage(v)
	switch v.Reason {
	case validator.ReasonInvalidJSON, validator.ReasonSchemaViolation, validator.ReasonMalformedToolCall:
		// A grammar cannot continue a released prefix (llama-server
		// refuses the combination), so constrain only fresh attempts.
		if v.Reason != validator.ReasonMalformedToolCall && x.out.sent == 0 {
			x.constrainJSON(b, kind)
		}
		if v.Reason == validator.ReasonMalformedToolCall {
			note = correctionTool + " " + note
		} else {
			note = correctionJSON + " " + note
		}
	case validator.ReasonRepetitionLoop:
		x.route.antiRepeat(b, kind)
		note = correctionLoop
	}
	x.route.continueWith(b, note, string(x.out.answerText(x.out.sent)))
	return b.encode()
}

// constrainJSON asks the upstream for grammar-constrained JSON: the
// request's schema, else any JSON object.
func (x *exchange) constrainJSON(b rawBody, kind upstream.Kind) {
	var schema json.RawMessage
	if rf := x.req.vreq.ResponseFormat; rf != nil && len(rf.Schema) > 0 {
		schema = rf.Schema
	}
	x.route.constrainJSON(b, kind, schema)
}

func findingMessage(v validator.Verdict) string {
	for _, f := range v.Findings {
		if f.Reason == v.Reason && f.Message != "" {
			return f.Message
		}
	}
	return string(v.Reason)
}

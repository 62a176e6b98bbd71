package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// The ends of a request: pass (an attempt passed), halt (the policy
// stopped it), refused (the upstream refused or could not be reached),
// reject (the request never reached an upstream); each publishes the
// request's end (finished).

func (x *exchange) meta(v validator.Verdict) *meta {
	v.ID = x.id
	v.Findings = x.g.scrubFindings(append(v.Findings[:len(v.Findings):len(v.Findings)], x.tally.notes...))
	return &meta{Verdict: v, RequestID: x.id, Attempts: x.tally.attempts, Repaired: x.repairedReasons(v)}
}

// pass ends a request whose attempt passed.
func (x *exchange) pass(v validator.Verdict) {
	x.adjustUsage()
	m := x.meta(v)
	if x.req.stream {
		// The rest of the text, the held tool calls, the closing chunks
		// and the verdict: one write (end).
		x.out.startBatch()
		x.out.releaseRest()
		for _, p := range x.cur.heldTool {
			x.out.emit(p)
		}
		if len(x.cur.tail) == 0 {
			x.cur.tail = append(x.cur.tail, x.finalChunk())
		}
		for i, p := range x.cur.tail {
			if i == len(x.cur.tail)-1 {
				p = withMeta(p, m)
			}
			x.out.emit(p)
		}
		x.out.endBatch(false)
		setVerdictHeaders(x.w.Header(), m) // sent as trailers
		x.out.end(nil)
	} else if x.ended != nil && x.ended.collect {
		// One of several choices: the request's one body is assembled
		// from every choice's answer (choices.go).
		x.out.releaseRest()
		top, out := x.answer()
		x.ended.kept = &choiceAnswer{top: top, out: out, meta: m}
	} else {
		x.out.releaseRest()
		setVerdictHeaders(x.w.Header(), m)
		writeJSON(x.w, http.StatusOK, json.RawMessage(withMeta(x.body200(), m)))
	}
	outcome := events.OutcomeReleased
	if x.tally.repaired {
		outcome = events.OutcomeRepaired
	}
	x.finished(outcome, http.StatusOK)
}

// finalChunk synthesizes the closing chunk when the upstream sent none of
// its own after the text.
func (x *exchange) finalChunk() []byte {
	fr := x.cur.finish
	if fr == "" {
		fr = "stop"
	}
	return x.route.appendChunk(nil, &x.tpl, nil, fr)
}

// body200 assembles a non-streaming response from the streamed attempt:
// the top-level members of the closing chunks (usage, timings, Ollama's
// durations) are kept, the text and tool calls are put whole into the
// response's message.
func (x *exchange) body200() []byte {
	top, out := x.answer()
	return x.route.body(top, out).encode()
}

// answer is what a non-streaming response is assembled from: the
// top-level members of the closing chunks and the attempt's answer.
func (x *exchange) answer() (rawBody, *output) {
	top := rawBody{}
	for _, p := range x.cur.tail {
		var m rawBody
		if json.Unmarshal(p, &m) == nil {
			for k, v := range m {
				top[k] = v
			}
		}
	}
	rsn := string(x.out.reasoningText())
	if len(x.cur.passed) > 0 {
		rsn += string(x.cur.passed)
	}
	return top, &output{text: string(x.out.answerText(len(x.out.text))), reasoning: rsn, finish: x.cur.finish, tpl: &x.tpl, tools: x.cur.tools, acc: &x.cur.acc}
}

// halt stops the request with the verdict's error code: an HTTP error
// when nothing has been sent yet on a non-streaming request, else an
// in-band error event and a clean end of the stream.
func (x *exchange) halt(v validator.Verdict) {
	v = policy.Halted(v)
	markFinal(x.w.Header())
	m := x.meta(v)
	msg := x.g.scrub(haltMessage(v))
	e := apiError{Message: msg, Type: errorType(v.Reason, v.Action), Code: ErrorCode(v.Reason)}
	status := HaltStatus(v.Reason, v.Action)
	ev := x.event(events.Halt)
	ev.Verdict, ev.Text = &m.Verdict, x.eventText()
	x.publish(x.incidentTimed(ev))
	switch {
	case !x.req.stream || !x.out.wroteHeader && x.tally.attempts == 0:
		x.writeError(status, e, m, true)
	default:
		if !x.out.wroteHeader {
			x.out.writeStreamHeader()
		}
		b, _ := json.Marshal(x.route.errorBody(e, m, true))
		setVerdictHeaders(x.w.Header(), m)
		x.out.end(b)
		status = http.StatusOK
	}
	outcome := events.OutcomeHalted
	if v.Action == validator.ActionBlock {
		outcome = events.OutcomeBlocked
	}
	x.finished(outcome, status)
}

// refused answers when the upstream could not be reached or refused the
// first attempt: an unreachable upstream is a 502 upstream_error; an
// upstream 4xx is passed on with its status and message (the request was
// bad for it), a 5xx becomes 502.
func (x *exchange) refused(res result) {
	markFinal(x.w.Header())
	status := http.StatusBadGateway
	msg := x.g.scrub(res.errMessage())
	code := ErrorCode(validator.ReasonUpstreamError)
	if res.status >= 400 && res.status < 500 {
		status = res.status
		msg = upstreamMessage(res.body, msg)
		code = upstreamCode(res.status, msg)
	}
	fmsg := msg
	if code != ErrorCode(validator.ReasonUpstreamError) {
		fmsg = fmt.Sprintf("upstream refused the request (%d): %q", res.status, msg)
	}
	v := policy.Halted(x.decide(validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError, Message: fmsg}))
	m := x.meta(v)
	x.writeError(status, apiError{Message: msg, Type: "aegis_unavailable", Code: code}, m, false)
	if status < 500 {
		// The upstream judged the client's request bad: no halt of ours.
		x.finished(events.OutcomeRejected, status)
		return
	}
	ev := x.event(events.Halt)
	ev.Verdict, ev.Text = &m.Verdict, x.eventText()
	x.publish(ev)
	x.finished(events.OutcomeHalted, status)
}

// upstreamMessage is the message of an upstream's error body (a string
// or an object with a message), else msg.
func upstreamMessage(body []byte, msg string) string {
	var ue struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &ue) != nil || len(ue.Error) == 0 {
		return msg
	}
	var s string
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(ue.Error, &s) == nil {
		return s
	} else if json.Unmarshal(ue.Error, &o) == nil && o.Message != "" {
		return o.Message
	}
	return msg
}

// reject answers a request that never reached an upstream.
func (x *exchange) reject(status int, e apiError) {
	x.writeError(status, e, nil, false)
	x.publish(events.Event{Kind: events.RequestFinished, RequestID: x.id, Route: x.route.String(), Model: x.req.model,
		Outcome: events.OutcomeRejected, Status: status, Duration: x.g.now().Sub(x.start), Error: e.Message})
}

// writeError answers with an error body in the client's dialect; m,
// when set, is the verdict, also in the headers.
func (x *exchange) writeError(status int, e apiError, m *meta, coded bool) {
	if m != nil {
		setVerdictHeaders(x.w.Header(), m)
	}
	if x.out.midStream() { // the stream's status is out: the error is an event on it
		b, _ := json.Marshal(x.route.errorBody(e, m, coded))
		x.out.end(b)
		return
	}
	writeJSON(x.w, status, x.route.errorBody(e, m, coded))
}

// finished publishes the request's end with its timings.
func (x *exchange) finished(outcome string, status int) {
	if x.ended != nil {
		x.ended.outcome, x.ended.status = outcome, status
		return
	}
	e := x.timed(events.Event{Kind: events.RequestFinished, RequestID: x.id, Route: x.route.String(), Upstream: x.upName(),
		Model: x.req.model, Stream: x.req.stream, Attempt: x.tally.attempts, Outcome: outcome, Status: status})
	e.Tokens = x.completionTokens()
	e.Text = x.eventText()
	x.publish(e)
}

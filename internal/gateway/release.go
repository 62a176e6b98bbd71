package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/chunkscan"
	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// releaser owns the output and the client's side of it: the output text
// (the released prefix text[:sent], then the current attempt's text), how
// much of it the client was sent, the upstream chunks that wait, and the
// stream's write buffer. The text is kept here once: an attempt's checks
// read it as it is fed, and the attempt keeps only its length; the
// attempt's release point says how far the releaser may go. It alone
// releases, frames and writes: what it needs of the exchange (the
// client's writer, the dialect, the answer's identity, the clock) is
// bound once, before the first attempt (bindReleaser).
type releaser struct {
	client       http.ResponseWriter
	rc           *http.ResponseController // made once, for every write
	wire         dialect                  // frames the stream, spells synthesized chunks
	tpl          *template                // the answer's identity in synthesized chunks
	streamed     bool                     // false: the body is written whole at the end
	clock        clock.Clock              // stamps firstOut
	writeTimeout time.Duration            // for each write to the client
	cancel       context.CancelFunc       // ends the request when a write fails

	text    []byte
	sent    int
	pending []pend
	// spare are buffers of released pending chunks, reused by keep;
	// scratch holds a synthesized chunk until emit copies it.
	spare   [][]byte
	scratch []byte
	batch   bool    // release leaves the write to the end of the batch
	out     []byte  // write buffer (stream)
	outBuf  *[]byte // out's pooled storage (recycle)

	wroteHeader bool
	firstOut    time.Time // the first text the client got
	heldMax     int       // the most text held back at once
}

// pend is an upstream chunk not yet (wholly) given to the client, with
// the output offsets of its text.
type pend struct {
	raw        []byte
	start, end int
	owned      bool
}

// restart begins a new attempt after the released prefix.
func (r *releaser) restart() {
	r.text = r.text[:r.sent]
	r.pending = r.pending[:0]
}

// noteHeld records how much text is held back now.
func (r *releaser) noteHeld() {
	r.heldMax = max(r.heldMax, len(r.text)-r.sent)
}

// keep copies a chunk that must outlive the stream reader's buffer into a
// buffer released chunks gave back, so that holding chunks back costs no
// allocation once a stream is under way.
func (r *releaser) keep(p []byte) []byte {
	if n := len(r.spare); n > 0 {
		b := r.spare[n-1]
		r.spare = r.spare[:n-1]
		return append(b, p...)
	}
	return clone(p)
}

// release gives the client the output up to rp. Upstream chunks wholly
// inside the released range go out byte for byte (their unknown fields
// intact); a chunk cut by the release point goes out as a synthesized
// chunk with the released part of its text, and its rest later the same
// way. Non-streaming requests only advance the offset: their body is
// written at the end.
func (r *releaser) release(rp int) {
	if rp > len(r.text) {
		rp = len(r.text)
	}
	if !r.streamed {
		if rp > r.sent {
			r.sent = rp
		}
		return
	}
	n := 0
	for n < len(r.pending) {
		pc := &r.pending[n]
		if pc.end > rp {
			if rp > r.sent && pc.start < rp {
				r.scratch = r.wire.appendChunk(r.scratch[:0], r.tpl, r.text[r.sent:rp], "")
				r.emit(r.scratch)
				r.sent = rp
			}
			break
		}
		switch {
		case pc.start >= r.sent:
			r.emit(pc.raw)
		case pc.end > r.sent:
			r.scratch = r.wire.appendChunk(r.scratch[:0], r.tpl, r.text[r.sent:pc.end], "")
			r.emit(r.scratch)
		}
		if pc.end > r.sent {
			r.sent = pc.end
		}
		if pc.owned { // emit copied it: its buffer serves a later chunk
			r.spare = append(r.spare, pc.raw[:0])
		}
		n++
	}
	if n > 0 {
		r.pending = append(r.pending[:0], r.pending[n:]...)
	}
	// Also when only the cut part of the first pending chunk went out:
	// the client must not wait for the next chunk to get it.
	if !r.batch {
		r.flush()
	}
}

// emit frames one payload for the client's stream.
func (r *releaser) emit(p []byte) {
	if !r.wroteHeader {
		r.writeStreamHeader()
	}
	if r.firstOut.IsZero() && r.sent < len(r.text) {
		r.firstOut = r.clock.Now()
	}
	if r.out == nil {
		r.outBuf = outPool.Get().(*[]byte)
		r.out = (*r.outBuf)[:0]
	}
	r.out = r.wire.frame(r.out, p)
	if r.batch && len(r.out) >= maxBatchBytes {
		r.flush()
	}
}

// maxBatchBytes bounds what one batch holds back from the client. A write
// larger than the HTTP server's 4 KiB buffer costs three system calls
// whatever its size, so under load, when the reader runs ahead, a large
// bound means fewer of them (a 128-token answer: 8 writes instead of 11).
const maxBatchBytes = 32 << 10

// outPool holds the write buffers of finished streams: a stream's
// buffer, grown to its largest batch, serves the next one.
var outPool = sync.Pool{New: func() any { b := make([]byte, 0, 8<<10); return &b }}

// recycle gives the stream's write buffer back once nothing more is
// written.
func (r *releaser) recycle() {
	if r.outBuf != nil && cap(r.out) <= 1<<20 {
		*r.outBuf = r.out[:0]
		outPool.Put(r.outBuf)
	}
	r.outBuf, r.out = nil, nil
}

func (r *releaser) writeStreamHeader() {
	h := r.client.Header()
	r.wire.streamHeader(h)
	h.Set("Trailer", strings.Join([]string{HeaderVerdict, HeaderReason, HeaderAttempts}, ", "))
	r.client.WriteHeader(http.StatusOK)
	r.wroteHeader = true
}

// flush writes what the write buffer holds.
func (r *releaser) flush() {
	if len(r.out) == 0 {
		return
	}
	r.writeOut()
}

// writeOut sends the buffered output to the client within the client
// write timeout, lifted again after it (the next request on the
// connection must not inherit it). A failed write (the client left, or
// read nothing for that long) ends the request: its context is
// cancelled, which stops the upstream generation.
func (r *releaser) writeOut() {
	if r.rc == nil {
		r.rc = http.NewResponseController(r.client)
	}
	armed := r.rc.SetWriteDeadline(time.Now().Add(r.writeTimeout)) == nil
	_, err := r.client.Write(r.out)
	r.out = r.out[:0]
	if err == nil {
		if err = r.rc.Flush(); errors.Is(err, http.ErrNotSupported) {
			err = nil
		}
	}
	if armed {
		r.rc.SetWriteDeadline(time.Time{})
	}
	if err != nil && r.cancel != nil {
		r.cancel()
	}
}

// end writes the end of the stream: last, when set, framed as its last
// payload, then the dialect's end marker.
func (r *releaser) end(last []byte) {
	if last != nil {
		r.out = r.wire.frame(r.out, last)
	}
	r.out = r.wire.appendEnd(r.out)
	r.flush()
}

// releaseCleared is called when the upstream fails mid-stream: the text
// it sent is all there will be, so the checks judge it as complete, and
// what they pass goes to the client before the halt (or is continued by
// the retry). Text a check fails stays held.
func (r *releaser) releaseCleared(chk Checker, at time.Time) {
	if st := chk.CloseAt(at); !st.Failed {
		r.release(st.Release)
	}
}

// bindReleaser gives the releaser what it needs of the exchange, once,
// before the first attempt, with the buffers a finished exchange left.
func (x *exchange) bindReleaser() {
	r := &x.releaser
	r.client, r.wire, r.tpl, r.streamed = x.w, x.route, &x.tpl, x.stream
	r.clock, r.writeTimeout, r.cancel = x.g.clock(), x.g.clientWriteTimeout(), x.cancel
	if s, ok := scratchPool.Get().(*scratch); ok {
		r.spare, r.pending, x.tokens = s.spare, s.pending[:0], s.tokens[:0]
		*s = scratch{}
		x.scratch = s
	}
	if r.text == nil {
		// A typical answer's text in one allocation, not a dozen
		// doublings.
		r.text = make([]byte, 0, 1<<10)
	}
}

// scratch holds the buffers of a finished exchange that nothing outside
// it refers to: the spare chunk buffers (each one's chunk went out, copied
// into the write buffer), the list of pending chunks and the token
// offsets. The next exchange takes them over, so that holding chunks back
// and counting tokens allocate nothing once a server is under way.
type scratch struct {
	spare   [][]byte
	pending []pend
	tokens  []tokenSpan
}

var scratchPool sync.Pool // *scratch

// Bounds on what scratch keeps: a rare long answer's buffers are left
// to the collector.
const (
	maxScratchSpare = 64
	maxScratchBuf   = 4 << 10
	maxScratchList  = 16 << 10
)

// recycle gives the write buffer and the scratch buffers back once
// nothing more is written.
func (x *exchange) recycle() {
	x.releaser.recycle()
	s := x.scratch
	if s == nil {
		s = &scratch{}
	}
	n := 0
	for _, b := range x.spare {
		if n < maxScratchSpare && cap(b) <= maxScratchBuf {
			x.spare[n] = b[:0]
			n++
		}
	}
	clear(x.spare[n:])
	s.spare = x.spare[:n]
	if cap(x.pending) <= maxScratchList {
		clear(x.pending[:cap(x.pending)]) // the chunks they point to
		s.pending = x.pending[:0]
	}
	if cap(x.tokens) <= maxScratchList {
		s.tokens = x.tokens[:0]
	}
	x.spare, x.pending, x.tokens, x.scratch = nil, nil, nil, nil
	scratchPool.Put(s)
}

func (x *exchange) meta(v validator.Verdict) *meta {
	v.ID = x.id
	v.Findings = x.g.scrubFindings(append(v.Findings[:len(v.Findings):len(v.Findings)], x.notes...))
	return &meta{Verdict: v, RequestID: x.id, Attempts: x.attempts, Repaired: x.repaired && v.Verdict == validator.Pass}
}

// pass ends a request whose attempt passed.
func (x *exchange) pass(v validator.Verdict) {
	x.adjustUsage()
	m := x.meta(v)
	if x.stream {
		// The rest of the text, the held tool calls, the closing chunks
		// and the verdict: one write (end).
		x.batch = true
		x.release(len(x.text))
		for _, p := range x.heldTool {
			x.emit(p)
		}
		if len(x.tail) == 0 {
			x.tail = append(x.tail, x.finalChunk())
		}
		for i, p := range x.tail {
			if i == len(x.tail)-1 {
				p = withMeta(p, m)
			}
			x.emit(p)
		}
		x.batch = false
		setVerdictHeaders(x.w.Header(), m) // sent as trailers
		x.end(nil)
	} else {
		x.sent = len(x.text)
		setVerdictHeaders(x.w.Header(), m)
		writeJSON(x.w, http.StatusOK, json.RawMessage(withMeta(x.body200(), m)))
	}
	outcome := events.OutcomeReleased
	if x.repaired {
		outcome = events.OutcomeRepaired
	}
	x.finished(outcome, http.StatusOK)
}

// finalChunk synthesizes the closing chunk when the upstream sent none of
// its own after the text.
func (x *exchange) finalChunk() []byte {
	fr := x.finish
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
	top := rawBody{}
	for _, p := range x.tail {
		var m rawBody
		if json.Unmarshal(p, &m) == nil {
			for k, v := range m {
				top[k] = v
			}
		}
	}
	return x.route.body(top, &output{text: string(x.text), finish: x.finish, tpl: &x.tpl,
		tools: x.tools.calls, olTools: x.olTools, acc: &x.acc})
}

// halt stops the request with the verdict's error code: an HTTP error
// when nothing has been sent yet on a non-streaming request, else an
// in-band error event and a clean end of the stream.
func (x *exchange) halt(v validator.Verdict) {
	if v.Action != validator.ActionBlock {
		v.Action = validator.ActionHalt
	}
	markFinal(x.w.Header())
	m := x.meta(v)
	msg := x.g.scrub(haltMessage(v))
	e := apiError{Message: msg, Type: errorType(v.Reason, v.Action), Code: ErrorCode(v.Reason)}
	status := HaltStatus(v.Reason, v.Action)
	x.publish(events.Event{Kind: events.Halt, RequestID: x.id, Route: x.route.String(), Upstream: x.upName(),
		Model: x.model, Attempt: x.attempts, Verdict: &m.Verdict, Text: x.eventText()})
	switch {
	case !x.stream || !x.wroteHeader && x.attempts == 0:
		x.writeError(status, e, m, true)
	default:
		if !x.wroteHeader {
			x.writeStreamHeader()
		}
		b, _ := json.Marshal(x.route.errorBody(e, m, true))
		setVerdictHeaders(x.w.Header(), m)
		x.end(b)
		status = http.StatusOK
	}
	outcome := events.OutcomeHalted
	if v.Action == validator.ActionBlock {
		outcome = events.OutcomeBlocked
	}
	x.finished(outcome, status)
}

func haltMessage(v validator.Verdict) string {
	for _, f := range v.Findings {
		if f.Reason == v.Reason && f.Message != "" {
			return "aegis stopped the response (" + string(v.Reason) + "): " + f.Message
		}
	}
	return "aegis stopped the response (" + string(v.Reason) + ")"
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
		var ue struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(res.body, &ue) == nil && len(ue.Error) > 0 {
			var s string
			var o struct {
				Message string `json:"message"`
			}
			if json.Unmarshal(ue.Error, &s) == nil {
				msg = s
			} else if json.Unmarshal(ue.Error, &o) == nil && o.Message != "" {
				msg = o.Message
			}
		}
		code = upstreamCode(res.status, msg)
	}
	fmsg := msg
	if code != ErrorCode(validator.ReasonUpstreamError) {
		fmsg = fmt.Sprintf("upstream refused the request (%d): %q", res.status, msg)
	}
	v := x.decide(validator.Finding{Check: "gateway", Reason: validator.ReasonUpstreamError, Message: fmsg})
	v.Action = validator.ActionHalt
	m := x.meta(v)
	x.writeError(status, apiError{Message: msg, Type: "aegis_unavailable", Code: code}, m, false)
	if status < 500 {
		// The upstream judged the client's request bad: no halt of ours.
		x.finished(events.OutcomeRejected, status)
		return
	}
	x.publish(events.Event{Kind: events.Halt, RequestID: x.id, Route: x.route.String(), Upstream: x.upName(),
		Model: x.model, Attempt: x.attempts, Verdict: &m.Verdict, Text: x.eventText()})
	x.finished(events.OutcomeHalted, status)
}

// writeError answers with an error body in the client's dialect; m,
// when set, is the verdict, also in the headers.
func (x *exchange) writeError(status int, e apiError, m *meta, coded bool) {
	if m != nil {
		setVerdictHeaders(x.w.Header(), m)
	}
	writeJSON(x.w, status, x.route.errorBody(e, m, coded))
}

// eventText returns the attempt's output for an event when the policy
// allows logging outputs (log_text), else "". Finding offsets index it.
func (x *exchange) eventText() string {
	if !x.logText {
		return ""
	}
	return string(x.text)
}

func (x *exchange) upName() string {
	if x.up == nil {
		return ""
	}
	return x.up.Name
}

// finished publishes the request's end with its timings.
func (x *exchange) finished(outcome string, status int) {
	if x.result != nil {
		x.result.outcome = outcome
		return
	}
	e := events.Event{Kind: events.RequestFinished, RequestID: x.id, Route: x.route.String(), Upstream: x.upName(),
		Model: x.model, Stream: x.stream, Attempt: x.attempts, Outcome: outcome, Status: status,
		Duration: x.g.now().Sub(x.start), HeldBytes: x.heldMax}
	if !x.firstOut.IsZero() {
		e.TTFT = x.firstOut.Sub(x.start)
		if !x.firstUp.IsZero() {
			e.AddedTTFT = x.firstOut.Sub(x.firstUp)
		}
	}
	if !x.lastUp.IsZero() {
		e.VerdictDelay = x.g.now().Sub(x.lastUp)
	}
	e.Tokens = x.completionTokens()
	e.Text = x.eventText()
	x.publish(e)
}

// completionTokens reads the upstream's count of generated tokens from
// the closing chunks: usage.completion_tokens, llama-server's
// timings.predicted_n, or Ollama's eval_count. Zero when none says.
func (x *exchange) completionTokens() int {
	n := 0
	var c chunkscan.Counts
	for _, p := range x.tail {
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

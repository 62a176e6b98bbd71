package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
)

// releaser owns the output and the client's side of it: the output text
// (the released prefix text[:sent], then the current attempt's text), how
// much of it the client was sent, the upstream chunks that wait, the
// token offsets of the text, and the stream's write buffer. The text is
// kept here once: an attempt's checks read it as it is fed; the
// attempt's release point says how far the releaser may go. Its methods
// in this file are the only code that changes the text and the waiting
// chunks (accept, hold, extend, replace, release); it alone frames and
// writes. What it needs of the exchange (the client's writer, the
// dialect, the answer's identity, the clock) is bound once, before the
// first attempt (bind).
type releaser struct {
	client       http.ResponseWriter
	rc           *http.ResponseController // made once, for every write
	wire         clientWriter             // frames the stream, spells synthesized chunks
	tpl          *template                // the answer's identity in synthesized chunks
	streamed     bool                     // false: the body is written whole at the end
	clock        clock.Clock              // stamps firstOut
	writeTimeout time.Duration            // for each write to the client
	cancel       context.CancelFunc       // ends the request when a write fails

	text    []byte
	sent    int
	pending []pend
	// rsn are the ranges of text that are reasoning, fieldRsn those
	// spelled in a field of its own, hidden those the client never gets
	// (reasoning.go).
	rsn, fieldRsn, hidden []tokenSpan
	tokens                []tokenSpan // the current attempt's text chunks (budget.go)
	carried               int         // released tokens of earlier attempts
	// spare are buffers of released pending chunks, reused by keep;
	// scratch holds a synthesized chunk until emit copies it.
	spare   [][]byte
	scratch []byte
	batch   bool    // release leaves the write to the end of the batch
	out     []byte  // write buffer (stream)
	outBuf  *[]byte // out's pooled storage (recycle)

	wroteHeader bool
	firstOut    time.Time // the first text the client got
	lastWrite   time.Time // the last write to the client (keepalive.go)
	heldMax     int       // the most text held back at once

	pool *scratch // where the reusable buffers came from (recycle)

	// choice, when set, makes this one choice of a streamed n-choice
	// answer (choice.go).
	choice *choiceOpt
}

// pend is an upstream chunk not yet (wholly) given to the client, with
// the output offsets of its text.
type pend struct {
	raw        []byte
	start, end int
	owned      bool
	// reasoning: its text is reasoning in a field of its own (a cut is
	// spelled as reasoning); hidden: the client never gets it.
	reasoning, hidden bool
}

// bind gives the releaser the client's side, once, before the first
// attempt, with the buffers a finished exchange left.
func (r *releaser) bind(client http.ResponseWriter, wire clientWriter, tpl *template, streamed bool, clk clock.Clock,
	writeTimeout time.Duration, cancel context.CancelFunc) {
	r.client, r.wire, r.tpl, r.streamed = client, wire, tpl, streamed
	r.clock, r.writeTimeout, r.cancel = clk, writeTimeout, cancel
	if s, ok := scratchPool.Get().(*scratch); ok {
		r.spare, r.pending, r.tokens = s.spare, s.pending[:0], s.tokens[:0]
		*s = scratch{}
		r.pool = s
	}
	if r.text == nil {
		// A typical answer's text in one allocation, not a dozen
		// doublings.
		r.text = make([]byte, 0, 1<<10)
	}
}

// restart begins a new attempt after the released prefix.
func (r *releaser) restart() {
	r.text = r.text[:r.sent]
	r.pending = r.pending[:0]
	r.rsn, r.fieldRsn, r.hidden = trimSpans(r.rsn, r.sent), trimSpans(r.fieldRsn, r.sent), trimSpans(r.hidden, r.sent)
}

// accept appends the text of one upstream text chunk raw to the output
// and returns where it starts. A streamed chunk waits in pending until
// its text is released.
func (r *releaser) accept(raw, text []byte) int {
	start := len(r.text)
	r.text = append(r.text, text...)
	r.tokens = append(r.tokens, tokenSpan{start, len(r.text)})
	if r.streamed {
		r.pending = append(r.pending, pend{raw: raw, start: start, end: len(r.text)})
	}
	return start
}

// hold keeps a streamed chunk without text (the role chunk): it goes out
// when the text before it does.
func (r *releaser) hold(raw []byte) {
	r.pending = append(r.pending, pend{raw: raw, start: len(r.text), end: len(r.text)})
}

// extend appends text read without checks (a local repair reads the rest
// of a failed answer): no chunk of it is sent as it came.
func (r *releaser) extend(text []byte) {
	r.text = append(r.text, text...)
}

// replace puts fixed in place of the unreleased text (a local repair):
// the upstream's text chunks no longer match it, so, streamed, it goes
// out as one chunk after the text-less ones (the role).
func (r *releaser) replace(fixed []byte) {
	r.text = fixed
	if r.streamed {
		kept := r.pending[:0]
		for _, p := range r.pending {
			if p.start == p.end {
				p.start, p.end = 0, 0
				kept = append(kept, p)
			}
		}
		r.pending = append(kept, pend{raw: r.wire.appendChunk(nil, r.tpl, fixed, ""), end: len(fixed), owned: true})
	}
	r.heldMax = max(r.heldMax, len(fixed))
}

// own copies the pending chunks that still point into the stream
// reader's buffer: they must outlive it.
func (r *releaser) own() {
	for i := len(r.pending) - 1; i >= 0 && !r.pending[i].owned; i-- {
		r.pending[i].raw, r.pending[i].owned = r.keep(r.pending[i].raw), true
	}
}

// startBatch leaves the writes of what is released to endBatch: under
// load the reader queues several chunks, and what they release goes to
// the client in one write.
func (r *releaser) startBatch() { r.batch = true }

// endBatch ends a batch; write says to write what it released now (a
// passed attempt leaves it to go out with the verdict).
func (r *releaser) endBatch(write bool) {
	r.batch = false
	if write {
		r.flush()
	}
}

// releaseRest releases the whole output: the attempt passed.
func (r *releaser) releaseRest() { r.release(len(r.text)) }

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

func clone(p []byte) []byte { return append([]byte(nil), p...) }

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
				if !pc.hidden {
					r.scratch = r.cutOf(pc, r.text[r.sent:rp])
					r.emit(r.scratch)
				}
				r.sent = rp
			}
			break
		}
		switch {
		case pc.hidden:
		case pc.start >= r.sent:
			r.emit(pc.raw)
		case pc.end > r.sent:
			r.scratch = r.cutOf(pc, r.text[r.sent:pc.end])
			r.emit(r.scratch)
		}
		if pc.end > r.sent {
			r.sent = pc.end
		}
		if pc.owned && pc.raw != nil { // emit copied it: its buffer serves a later chunk
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

// cutOf spells the part text of the pending chunk pc, into scratch.
func (r *releaser) cutOf(pc *pend, text []byte) []byte {
	if pc.reasoning {
		if w, ok := r.wire.(reasoningWriter); ok {
			return w.appendReasoning(r.scratch[:0], r.tpl, text)
		}
	}
	return r.wire.appendChunk(r.scratch[:0], r.tpl, text, "")
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
	if r.choice != nil {
		p = r.choice.restamp(p)
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

func (r *releaser) writeStreamHeader() {
	if r.choice != nil {
		if r.choice.stream.started { // an earlier choice began the stream
			r.wroteHeader = true
			return
		}
		r.choice.stream.started = true
	}
	h := r.client.Header()
	r.wire.streamHeader(h)
	h.Set("Trailer", strings.Join([]string{HeaderVerdict, HeaderReason, HeaderAttempts, HeaderRepaired}, ", "))
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
	r.lastWrite = r.clock.Now()
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
	if r.choice == nil { // the last choice's end is the stream's (choices_stream.go)
		r.out = r.wire.appendEnd(r.out)
	}
	r.flush()
}

// midStream reports whether this is one choice of a streamed answer that
// an earlier choice began: an error goes out as an event on it.
func (r *releaser) midStream() bool { return r.choice != nil && r.choice.stream.started }

// releaseCleared is called when the upstream fails mid-stream: the text
// it sent is all there will be, so the checks judge it as complete, and
// what they pass goes to the client before the halt (or is continued by
// the retry). Text a check fails stays held.
func (r *releaser) releaseCleared(chk Checker, at time.Time) {
	if st := chk.CloseAt(at); !st.Failed {
		r.release(st.Release)
	}
}

// tokenSpan is the output offsets of one upstream text chunk.
type tokenSpan struct{ start, end int }

// carryTokens is called when an attempt failed and another continues the
// released prefix: it adds the released chunks of the failed attempt to
// the tokens carried over, and forgets the rest.
func (r *releaser) carryTokens() {
	for _, s := range r.tokens {
		if s.start < r.sent {
			r.carried++
		}
	}
	r.tokens = r.tokens[:0]
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
func (r *releaser) recycle() {
	if r.outBuf != nil && cap(r.out) <= 1<<20 {
		*r.outBuf = r.out[:0]
		outPool.Put(r.outBuf)
	}
	r.outBuf, r.out = nil, nil
	s := r.pool
	if s == nil {
		s = &scratch{}
	}
	n := 0
	for _, b := range r.spare {
		if n < maxScratchSpare && cap(b) <= maxScratchBuf {
			r.spare[n] = b[:0]
			n++
		}
	}
	clear(r.spare[n:])
	s.spare = r.spare[:n]
	if cap(r.pending) <= maxScratchList {
		clear(r.pending[:cap(r.pending)]) // the chunks they point to
		s.pending = r.pending[:0]
	}
	if cap(r.tokens) <= maxScratchList {
		s.tokens = r.tokens[:0]
	}
	r.spare, r.pending, r.tokens, r.pool = nil, nil, nil, nil
	scratchPool.Put(s)
}

package gateway

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// recordingWriter is a client that keeps what it is sent and counts the
// writes.
type recordingWriter struct {
	discardWriter
	got    bytes.Buffer
	writes int
	status int
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.got.Write(p)
}

func (w *recordingWriter) WriteHeader(status int) { w.status = status }

// part is one payload the client should get: upstream chunk raw (an
// index), or, when raw is -1, a chunk the releaser synthesizes with the
// text text[from:to].
type part struct{ raw, from, to int }

// TestReleaser drives the releaser on its own: upstream chunks wait as
// pending, each release point gives the client the chunks wholly before
// it byte for byte and the cut part of the next one as a chunk of its
// own, what is left stays pending, and a batch goes out in one write.
func TestReleaser(t *testing.T) {
	texts := []string{"Hel", "lo, w", "orld"} // "Hello, world": [0,3) [3,8) [8,12)
	for _, tc := range []struct {
		name        string
		notStreamed bool
		batch       bool
		rps         []int // release points, in order
		want        []part
		wantSent    int
		wantPending int
		wantWrites  int
	}{
		{name: "nothing cleared", rps: []int{0}, wantPending: 3},
		{name: "whole chunks byte for byte", rps: []int{8}, want: []part{{raw: 0}, {raw: 1}},
			wantSent: 8, wantPending: 1, wantWrites: 1},
		{name: "release point inside a chunk", rps: []int{5}, want: []part{{raw: 0}, {-1, 3, 5}},
			wantSent: 5, wantPending: 2, wantWrites: 1},
		{name: "a cut first chunk goes out at once", rps: []int{2}, want: []part{{-1, 0, 2}},
			wantSent: 2, wantPending: 3, wantWrites: 1},
		{name: "the rest of a cut chunk", rps: []int{5, 12}, want: []part{{raw: 0}, {-1, 3, 5}, {-1, 5, 8}, {raw: 2}},
			wantSent: 12, wantWrites: 2},
		{name: "a point past the text", rps: []int{99}, want: []part{{raw: 0}, {raw: 1}, {raw: 2}},
			wantSent: 12, wantWrites: 1},
		{name: "a point behind what was sent", rps: []int{8, 3}, want: []part{{raw: 0}, {raw: 1}},
			wantSent: 8, wantPending: 1, wantWrites: 1},
		{name: "a batch is one write", batch: true, rps: []int{3, 5, 12}, want: []part{{raw: 0}, {-1, 3, 5}, {-1, 5, 8}, {raw: 2}},
			wantSent: 12, wantWrites: 1},
		{name: "not streamed: only the offset moves", notStreamed: true, rps: []int{5}, wantSent: 5, wantPending: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wire := dialectOllamaGenerate
			tpl := &template{model: "stories", createdAt: "2026-01-01T00:00:00Z", set: true}
			w := &recordingWriter{discardWriter: discardWriter{h: http.Header{}}}
			start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			clk := clock.NewFake(start)
			r := &releaser{client: w, wire: wire, tpl: tpl, streamed: !tc.notStreamed, clock: clk, writeTimeout: time.Minute}
			var raws [][]byte
			for _, s := range texts {
				// An upstream chunk carries a field the gateway does not
				// spell: only a chunk passed on byte for byte has it.
				raw := append([]byte(`{"upstream_only":1,`), wire.appendChunk(nil, tpl, []byte(s), "")[1:]...)
				raws = append(raws, raw)
				begin := len(r.text)
				r.text = append(r.text, s...)
				if r.streamed {
					r.pending = append(r.pending, pend{raw: raw, start: begin, end: len(r.text)})
				}
			}
			clk.Advance(time.Second)
			r.batch = tc.batch
			for _, rp := range tc.rps {
				r.release(rp)
			}
			if tc.batch {
				r.batch = false
				r.flush()
			}

			var want []byte
			for _, p := range tc.want {
				if p.raw >= 0 {
					want = wire.frame(want, raws[p.raw])
				} else {
					want = wire.frame(want, wire.appendChunk(nil, tpl, r.text[p.from:p.to], ""))
				}
			}
			if got := w.got.Bytes(); !bytes.Equal(got, want) {
				t.Errorf("the client got\n%s\nwant\n%s", got, want)
			}
			if r.sent != tc.wantSent || len(r.pending) != tc.wantPending || w.writes != tc.wantWrites {
				t.Errorf("sent %d, %d pending, %d writes; want %d, %d, %d",
					r.sent, len(r.pending), w.writes, tc.wantSent, tc.wantPending, tc.wantWrites)
			}
			wantHeader := len(tc.want) > 0
			if r.wroteHeader != wantHeader || (w.status == http.StatusOK) != wantHeader {
				t.Errorf("stream header written %v (status %d), want %v", r.wroteHeader, w.status, wantHeader)
			}
			if wantFirst := wantHeader; r.firstOut.IsZero() == wantFirst || wantFirst && !r.firstOut.Equal(start.Add(time.Second)) {
				t.Errorf("first output at %v, want %v (sent anything: %v)", r.firstOut, start.Add(time.Second), wantFirst)
			}
		})
	}
}

// TestPassEndsInOneWrite: the text the checks hold until the answer ends
// goes out in the write that carries the verdict, not in a write of its
// own before it.
func TestPassEndsInOneWrite(t *testing.T) {
	var evs [][]byte
	for _, tok := range []string{"the", " cat", " and", " the"} { // the last word was seen: held to the end
		evs = append(evs, []byte("data: "+chatChunk(tok)+"\n\n"))
	}
	evs = append(evs, []byte("data: "+finishChunk+"\n\n"), []byte("data: [DONE]\n\n"))
	up := mustUpstream(t, "up", replay(t, evs, 0).URL, upstream.KindLlamaServer)
	g := &Gateway{Upstreams: []*upstream.Upstream{up}}
	w := &recordingWriter{discardWriter: discardWriter{h: http.Header{}}}
	var last []byte
	g.ServeHTTP(&lastWrite{w, &last}, httptest.NewRequest(http.MethodPost, "/v1/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"stream":true}`)))
	if !bytes.Contains(w.got.Bytes(), []byte(`"verdict":"pass"`)) {
		t.Fatalf("no passed verdict in %q", w.got.Bytes())
	}
	if !bytes.Contains(last, []byte(`"content":"the"`)) || !bytes.Contains(last, []byte(`"verdict":"pass"`)) {
		t.Errorf("the last write %q does not carry both the held text and the verdict", last)
	}
}

// lastWrite keeps the last write a recordingWriter got.
type lastWrite struct {
	*recordingWriter
	last *[]byte
}

func (w *lastWrite) Write(p []byte) (int, error) {
	*w.last = append((*w.last)[:0], p...)
	return w.recordingWriter.Write(p)
}

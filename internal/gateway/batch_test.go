package gateway

import (
	"net/http"
	"testing"
	"time"
)

// countingWriter is a client that counts the writes it gets.
type countingWriter struct {
	discardWriter
	writes, bytes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	c.bytes += len(p)
	return len(p), nil
}

// TestBatchOneWrite: what a batch of queued chunks releases goes to the
// client in one write as long as it stays under maxBatchBytes. A reader
// running ahead under load hands over batches of tens of kilobytes;
// each write of more than the HTTP server's 4 KiB buffer costs three
// system calls however large it is, so fewer, larger writes are cheaper.
func TestBatchOneWrite(t *testing.T) {
	evs := recorded(t, "llama-chat-200.sse")
	g := &Gateway{Policy: mustPolicy(t, "checks: {repetition: false, leak: false}\n")}
	w := &countingWriter{discardWriter: discardWriter{h: http.Header{}}}
	x, chk := streamExchange(t, g, w)
	var c chunk
	x.out.startBatch()
	framed := 0
	for _, ev := range evs[:100] { // about 27 KB framed
		p := ev[len("data: ") : len(ev)-2]
		if err := x.route.parse(p, &c); err != nil {
			t.Fatal(err)
		}
		x.tpl.learn(&c, 1)
		if !x.feed(chk, p, &c, time.Now()) {
			t.Fatal("the checks failed the stream")
		}
		framed += len(ev)
	}
	x.out.endBatch(true)
	if framed < 20<<10 || framed >= maxBatchBytes {
		t.Fatalf("the batch is %d bytes; the test wants one between 20 KiB and maxBatchBytes", framed)
	}
	if w.writes != 1 || w.bytes == 0 {
		t.Errorf("%d writes (%d bytes) for one batch of %d bytes, want 1", w.writes, w.bytes, framed)
	}
}

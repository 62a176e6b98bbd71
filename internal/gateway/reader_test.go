package gateway

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// readAhead runs one reader over stream to its end before the gateway
// takes anything (as under load, when the reader runs ahead), then takes
// every payload, checks it and puts it back.
func readAhead(t testing.TB, stream []byte, want [][]byte) *reader {
	open := func(context.Context) (*upstream.Stream, *result) {
		return upstream.NewSSEStream(io.NopCloser(bytes.NewReader(stream))), nil
	}
	rd := startReader(context.Background(), open, clock.Real, readerHooks{})
	<-rd.done
	var got int
	for _, c := range rd.take() {
		if c.err != nil {
			if c.err != io.EOF {
				t.Fatal(c.err)
			}
			continue
		}
		if !bytes.Equal(c.p, want[got]) {
			t.Fatalf("payload %d: got %q, want %q", got, c.p, want[got])
		}
		got++
		rd.put([]upChunk{c})
	}
	if got != len(want) {
		t.Fatalf("%d payloads, want %d", got, len(want))
	}
	return rd
}

func recordedPayloads(t testing.TB) (stream []byte, payloads [][]byte) {
	for _, ev := range recorded(t, "llama-chat-200.sse") {
		stream = append(stream, ev...)
		if p := ev[len("data: ") : len(ev)-2]; string(p) != "[DONE]" {
			payloads = append(payloads, p)
		}
	}
	return stream, payloads
}

// TestReaderRecyclesBlocks: the payloads of a stream are kept in shared
// blocks, and every block goes back to the pool once the gateway has put
// back its payloads, also when the reader ran ahead of the gateway.
func TestReaderRecyclesBlocks(t *testing.T) {
	stream, payloads := recordedPayloads(t)
	// A long payload gets a buffer of its own.
	big := append([]byte(`{"choices":[{"delta":{"content":"`), bytes.Repeat([]byte("x"), 2*bigPayload)...)
	big = append(big, `"}}]}`...)
	stream = append(append([]byte("data: "), big...), append([]byte("\n\n"), stream...)...)
	payloads = append([][]byte{big}, payloads...)
	rd := readAhead(t, stream, payloads)
	rd.release()
	if rd.blocks.used < 2 || rd.blocks.recycled != rd.blocks.used {
		t.Fatalf("blocks used %d, recycled %d; want several, all recycled", rd.blocks.used, rd.blocks.recycled)
	}
}

// TestReaderAllocs: a stream read ahead of the gateway costs a handful of
// allocations (the reader, its goroutine and channels), not one per
// payload.
func TestReaderAllocs(t *testing.T) {
	if raceOn {
		t.Skip("sync.Pool drops items under the race detector")
	}
	stream, payloads := recordedPayloads(t)
	n := testing.AllocsPerRun(20, func() { readAhead(t, stream, payloads).release() })
	if n > 20 {
		t.Errorf("%.0f allocations for a stream of %d payloads, want at most 20", n, len(payloads))
	}
}

// tickClock moves on a millisecond at every reading.
type tickClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *tickClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func (c *tickClock) NewTimer(d time.Duration) clock.Timer { return clock.Real.NewTimer(d) }

// piecesReader returns one piece per Read, as a network read returns what
// arrived.
type piecesReader struct{ pieces []string }

func (r *piecesReader) Read(p []byte) (int, error) {
	if len(r.pieces) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.pieces[0])
	r.pieces = r.pieces[1:]
	return n, nil
}

// TestReaderStampsOncePerRead: the payloads one read of the upstream
// brought share that read's arrival stamp, and a later read gets a new
// one, so a chunk costs no clock reading of its own under load.
func TestReaderStampsOncePerRead(t *testing.T) {
	body := &piecesReader{pieces: []string{"data: {\"a\":1}\n\ndata: {\"b\":2}\n\n", "data: {\"c\":3}\n\ndata: [DONE]\n\n"}}
	open := func(context.Context) (*upstream.Stream, *result) {
		return upstream.NewSSEStream(io.NopCloser(body)), nil
	}
	rd := startReader(context.Background(), open, &tickClock{}, readerHooks{})
	<-rd.done
	q := rd.take()
	if len(q) != 4 || q[3].err != io.EOF {
		t.Fatalf("queued %d entries (%+v), want three payloads and the end", len(q), q)
	}
	if !q[1].at.Equal(q[0].at) {
		t.Errorf("payloads of one read stamped %v and %v, want one stamp", q[0].at, q[1].at)
	}
	if !q[2].at.After(q[1].at) {
		t.Errorf("payload of a later read stamped %v, not after %v", q[2].at, q[1].at)
	}
	if !q[3].at.Equal(q[2].at) {
		t.Errorf("the end, read with the last payload, stamped %v, want %v", q[3].at, q[2].at)
	}
	for _, c := range q {
		rd.put([]upChunk{c})
	}
	rd.release()
}

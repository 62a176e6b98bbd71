package gateway

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// upChunk is one payload read from the upstream, with when it arrived;
// err is set on the last one (io.EOF at a clean end), refused when the
// upstream could not be asked or refused the request.
type upChunk struct {
	p       []byte
	at      time.Time
	err     error
	refused *result
}

// readerQueueBytes bounds what the reader queues ahead of the gateway:
// past it the reader stops reading, and TCP back-pressure holds the
// upstream, so a client that stops reading costs bounded memory.
const readerQueueBytes = 1 << 20

// reader sends the request and reads the upstream's answer on its own
// goroutine, queueing the payloads with their arrival times: neither a
// slow client nor a slow check slows the upstream until readerQueueBytes
// are queued, and the upstream's silence is measured from what it sent,
// not from when the gateway got round to it. While the queue is full the
// reader waits, and that wait is taken off its clock (now): the upstream
// is not silent, the gateway is not listening.
type reader struct {
	mu     sync.Mutex
	q      []upChunk
	qBytes int
	free   [][]byte  // payload buffers the gateway is done with
	last   time.Time // arrival of the last payload (the start before one)
	ready  chan struct{}
	space  chan struct{} // the gateway took the queue
	done   chan struct{}
	stop   <-chan struct{}
	clk    clock.Clock

	paused     time.Duration // waits for queue space so far
	pauseStart time.Time     // the current wait's start, zero when reading
}

// startReader starts the reader: open sends the request and returns the
// stream, or the result that ends the attempt. hook, when set, runs after
// each payload is queued (tests pace a fake clock with it).
func startReader(ctx context.Context, open func() (*upstream.Stream, *result), clk clock.Clock, hook func()) *reader {
	r := &reader{last: clk.Now(), ready: make(chan struct{}, 1), space: make(chan struct{}, 1), done: make(chan struct{}),
		stop: ctx.Done(), clk: clk}
	go func() {
		defer close(r.done)
		st, refused := open()
		if refused != nil {
			r.push(upChunk{at: r.now(), refused: refused}, hook)
			return
		}
		defer st.Close()
		for {
			p, err := st.Next()
			c := upChunk{at: r.now(), err: err}
			if err == nil {
				c.p = append(r.buffer(), p...) // Next's slice is reused
			}
			r.push(c, hook)
			if err != nil {
				return
			}
		}
	}()
	return r
}

func (r *reader) push(c upChunk, hook func()) {
	r.mu.Lock()
	r.q = append(r.q, c)
	r.qBytes += len(c.p)
	if c.err == nil && c.refused == nil {
		r.last = c.at
	}
	full := r.qBytes > readerQueueBytes
	r.mu.Unlock()
	select {
	case r.ready <- struct{}{}:
	default:
	}
	if hook != nil {
		hook()
	}
	if full {
		r.waitSpace()
	}
}

// waitSpace waits until the gateway takes the queue (or the attempt
// ends), keeping the wait off the reader's clock.
func (r *reader) waitSpace() {
	r.mu.Lock()
	r.pauseStart = r.clk.Now()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.paused += r.clk.Now().Sub(r.pauseStart)
		r.pauseStart = time.Time{}
		r.mu.Unlock()
	}()
	for {
		r.mu.Lock()
		full := r.qBytes > readerQueueBytes
		r.mu.Unlock()
		if !full {
			return
		}
		select {
		case <-r.space:
		case <-r.stop:
			return
		}
	}
}

// now is the reader's clock: the gateway's clock less the time the reader
// waited for queue space (frozen during a wait).
func (r *reader) now() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.pauseStart.IsZero() {
		return r.pauseStart.Add(-r.paused)
	}
	return r.clk.Now().Add(-r.paused)
}

func (r *reader) buffer() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.free); n > 0 {
		b := r.free[n-1]
		r.free = r.free[:n-1]
		return b[:0]
	}
	return nil
}

// put gives back a payload's buffer once nothing refers to it.
func (r *reader) put(p []byte) {
	if cap(p) == 0 {
		return
	}
	r.mu.Lock()
	if len(r.free) < 64 {
		r.free = append(r.free, p[:0])
	}
	r.mu.Unlock()
}

// take returns the queued payloads; the queue goes on in spare, the
// slice the previous take returned, so that taking allocates nothing.
func (r *reader) take(spare []upChunk) []upChunk {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.q
	r.q, r.qBytes = spare[:0], 0
	select {
	case r.space <- struct{}{}:
	default:
	}
	return q
}

// unread puts payloads taken but not used back at the head of the queue.
func (r *reader) unread(q []upChunk) {
	if len(q) == 0 {
		return
	}
	r.mu.Lock()
	r.q = append(append([]upChunk(nil), q...), r.q...)
	for _, c := range q {
		r.qBytes += len(c.p)
	}
	r.mu.Unlock()
	select {
	case r.ready <- struct{}{}:
	default:
	}
}

// next returns a function that gives the queued payloads one by one,
// waiting for the reader, until the end of the stream (io.EOF), an error,
// or ctx's end.
func (r *reader) next(ctx context.Context) func() ([]byte, error) {
	var q []upChunk
	return func() ([]byte, error) {
		for len(q) == 0 {
			if q = r.take(nil); len(q) > 0 {
				break
			}
			select {
			case <-r.ready:
			case <-r.done:
				if q = r.take(nil); len(q) == 0 {
					return nil, io.EOF // the end was taken already
				}
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		c := q[0]
		q = q[1:]
		switch {
		case c.refused != nil:
			return nil, c.refused.err
		case c.err != nil:
			return nil, c.err
		}
		return c.p, nil
	}
}

// lastArrival is when the upstream last sent something.
func (r *reader) lastArrival() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

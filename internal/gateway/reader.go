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

// reader sends the request and reads the upstream's answer at full speed
// on its own goroutine, queueing the payloads with their arrival times:
// neither a slow client nor a slow check slows the upstream, and the
// upstream's silence is measured from what it sent, not from when the
// gateway got round to it.
type reader struct {
	mu    sync.Mutex
	q     []upChunk
	free  [][]byte  // payload buffers the gateway is done with
	last  time.Time // arrival of the last payload (the start before one)
	ready chan struct{}
	done  chan struct{}
}

// startReader starts the reader: open sends the request and returns the
// stream, or the result that ends the attempt. hook, when set, runs after
// each payload is queued (tests pace a fake clock with it).
func startReader(open func() (*upstream.Stream, *result), clk clock.Clock, hook func()) *reader {
	r := &reader{last: clk.Now(), ready: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(r.done)
		st, refused := open()
		if refused != nil {
			r.push(upChunk{at: clk.Now(), refused: refused}, hook)
			return
		}
		defer st.Close()
		for {
			p, err := st.Next()
			c := upChunk{at: clk.Now(), err: err}
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
	if c.err == nil && c.refused == nil {
		r.last = c.at
	}
	r.mu.Unlock()
	select {
	case r.ready <- struct{}{}:
	default:
	}
	if hook != nil {
		hook()
	}
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

// take returns the queued payloads.
func (r *reader) take() []upChunk {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.q
	r.q = nil
	return q
}

// unread puts payloads taken but not used back at the head of the queue.
func (r *reader) unread(q []upChunk) {
	if len(q) == 0 {
		return
	}
	r.mu.Lock()
	r.q = append(append([]upChunk(nil), q...), r.q...)
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
			if q = r.take(); len(q) > 0 {
				break
			}
			select {
			case <-r.ready:
			case <-r.done:
				if q = r.take(); len(q) == 0 {
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

package gateway

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// upChunk is one payload read from the upstream, with when it arrived;
// err is set on the last one (io.EOF at a clean end), refused when the
// upstream could not be asked or refused the request.
type upChunk struct {
	p       []byte
	blk     *block // where p is kept, nil when it has a buffer of its own
	at      time.Time
	err     error
	refused *result
}

// A block holds the payloads the reader copied, one after the other: a
// stream's chunks share a few pooled blocks instead of a buffer each. A
// block goes back to the pool once the reader moved on to another and the
// gateway put back every payload kept in it.
type block struct {
	buf  []byte
	live int  // payloads kept in it not yet put back
	full bool // the reader moved on to another block
}

const (
	blockSize = 16 << 10
	// bigPayload is the largest payload kept in a block; a larger one
	// (a long tool call, a big timings object) gets its own buffer.
	bigPayload = blockSize / 4
	// queueCap is the capacity of a pooled queue: a whole short answer.
	queueCap = 256
)

var (
	blockPool = sync.Pool{New: func() any { return &block{buf: make([]byte, 0, blockSize)} }}
	queuePool = sync.Pool{New: func() any { q := make([]upChunk, 0, queueCap); return &q }}
)

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
	spare  []upChunk // the queue the gateway took last, free again at the next take
	qMax   int       // the longest the queue was
	qBytes int
	took   int    // payloads the gateway has taken (less those put back with unread)
	blk    *block // the block payloads are copied into
	blocks struct{ used, recycled int }
	last   time.Time // arrival of the last payload (the start before one)
	stamp  time.Time // the last payload's stamp, zero before one
	ready  chan struct{}
	space  chan struct{} // the gateway took the queue
	done   chan struct{}
	stop   <-chan struct{}
	clk    clock.Clock

	paused     time.Duration // waits for queue space so far
	pauseStart time.Time     // the current wait's start, zero when reading
}

// startReader starts the reader: open sends the request with the context
// it is given and returns the stream, or the result that ends the
// attempt. hooks.read, when set, runs after each payload is queued (tests
// pace a fake clock with it); hooks.closed once the reader closed the
// upstream's response.
//
// The request runs until ctx ends, unless the stream ended first: then
// the reader reads the body to its end (drainStream) so that the
// connection goes back to the upstream client's pool for the next
// request, which a cancelled context would close.
func startReader(ctx context.Context, open func(context.Context) (*upstream.Stream, *result), clk clock.Clock, hooks readerHooks) *reader {
	r := &reader{last: clk.Now(), ready: make(chan struct{}, 1), space: make(chan struct{}, 1), done: make(chan struct{}),
		stop: ctx.Done(), clk: clk}
	r.q, r.spare = getQueue(), getQueue()
	upCtx, upCancel := context.WithCancel(context.WithoutCancel(ctx))
	var ended atomic.Bool
	stopAfter := context.AfterFunc(ctx, func() {
		if !ended.Load() {
			upCancel()
		}
	})
	goRead(func() {
		defer upCancel()
		defer stopAfter()
		if hooks.closed != nil {
			defer hooks.closed()
		}
		st := r.read(upCtx, open, hooks.read, &ended)
		r.retire()
		close(r.done)
		if st == nil {
			return
		}
		if ended.Load() {
			drainStream(st, upCancel)
		}
		st.Close()
	})
	return r
}

// readerHooks are the test hooks of a reader (Gateway.readHook, closeHook).
type readerHooks struct{ read, closed func() }

// read sends the request and queues the payloads to the end of the
// stream, which it returns (nil when the upstream refused); ended is set
// before the last is queued when the stream ended cleanly.
func (r *reader) read(ctx context.Context, open func(context.Context) (*upstream.Stream, *result), hook func(), ended *atomic.Bool) *upstream.Stream {
	st, refused := open(ctx)
	if refused != nil {
		r.push(upChunk{at: r.now(), refused: refused}, hook)
		return nil
	}
	for {
		reads := st.Reads()
		p, err := st.Next()
		// A payload the stream had read with the one before it
		// arrived with it: it takes that one's stamp, and a chunk
		// costs no clock read when the upstream sends faster than
		// the reader reads (tests pacing a fake clock per payload
		// with hook get a reading each).
		fresh := hook != nil || st.Reads() != reads
		if err == io.EOF && st.Ended() {
			ended.Store(true)
		}
		if r.pushPayload(p, err, fresh, hook); err != nil {
			return st
		}
	}
}

// What the reader reads of a body after its stream's last event: a
// server ends its chunked body right after the last event, so draining
// takes microseconds; one that does not is cut off.
const (
	drainWait  = 250 * time.Millisecond
	drainBytes = 16 << 10
)

// drainStream reads the rest of a finished stream's body, at most
// drainBytes for at most drainWait (then cancel aborts the request).
func drainStream(st *upstream.Stream, cancel context.CancelFunc) {
	t := time.AfterFunc(drainWait, cancel)
	defer t.Stop()
	st.Drain(drainBytes)
}

// idleReaders hands a reader's work to a goroutine that finished its last
// reader and waits for another: its stack has grown already to what
// sending a request and reading an answer take (a new goroutine grows and
// copies its stack two or three times in each request). A send succeeds
// only while such a goroutine waits; a nil func ends the goroutine that
// takes it.
var idleReaders = make(chan func())

// readerIdle is how long a goroutine waits for another reader before it
// ends.
const readerIdle = time.Second

// goRead runs f on a waiting reader goroutine, or on a new one.
func goRead(f func()) {
	select {
	case idleReaders <- f:
	default:
		go readLoop(f)
	}
}

func readLoop(f func()) {
	t := time.NewTimer(readerIdle)
	defer t.Stop()
	for {
		f()
		f = nil // nothing of the finished reader stays reachable
		t.Reset(readerIdle)
		select {
		case f = <-idleReaders:
			if f == nil {
				return
			}
		case <-t.C:
			return
		}
	}
}

// pushPayload queues what the stream's Next returned, stamped with its
// arrival (fresh: a new clock reading, else the last payload's stamp),
// copying p (Next reuses it): one lock per payload.
func (r *reader) pushPayload(p []byte, err error, fresh bool, hook func()) {
	r.mu.Lock()
	if fresh || r.stamp.IsZero() {
		r.stamp = r.nowLocked()
	}
	c := upChunk{at: r.stamp, err: err}
	if err == nil {
		r.copyInLocked(&c, p)
	}
	r.pushLocked(c, hook)
}

func (r *reader) push(c upChunk, hook func()) {
	r.mu.Lock()
	r.pushLocked(c, hook)
}

// pushLocked queues c and unlocks r.mu. The gateway is signalled only
// when the queue was empty: a queue with payloads in it was signalled
// already and not yet taken.
func (r *reader) pushLocked(c upChunk, hook func()) {
	r.q = append(r.q, c)
	r.qMax = max(r.qMax, len(r.q))
	r.qBytes += len(c.p)
	if c.err == nil && c.refused == nil {
		r.last = c.at
	}
	full := r.qBytes > readerQueueBytes
	signal := len(r.q) == 1
	r.mu.Unlock()
	if signal {
		select {
		case r.ready <- struct{}{}:
		default:
		}
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
	return r.nowLocked()
}

func (r *reader) nowLocked() time.Time {
	if !r.pauseStart.IsZero() {
		return r.pauseStart.Add(-r.paused)
	}
	return r.clk.Now().Add(-r.paused)
}

// copyInLocked copies p into the reader's block (a new one when it is full).
func (r *reader) copyInLocked(c *upChunk, p []byte) {
	if len(p) > bigPayload {
		c.p = append([]byte(nil), p...)
		return
	}
	b := r.blk
	if b == nil || cap(b.buf)-len(b.buf) < len(p) {
		r.retireLocked()
		b = blockPool.Get().(*block)
		r.blk = b
		r.blocks.used++
	}
	n := len(b.buf)
	b.buf = append(b.buf, p...)
	c.p, c.blk = b.buf[n:len(b.buf):len(b.buf)], b
	b.live++
}

// retire lets the current block go back to the pool once its payloads
// are put back; the reader calls it when it stops.
func (r *reader) retire() {
	r.mu.Lock()
	r.retireLocked()
	r.mu.Unlock()
}

func (r *reader) retireLocked() {
	if b := r.blk; b != nil {
		r.blk = nil
		b.full = true
		r.recycle(b)
	}
}

func (r *reader) recycle(b *block) {
	if b.full && b.live == 0 {
		b.buf, b.full = b.buf[:0], false
		blockPool.Put(b)
		r.blocks.recycled++
	}
}

// put gives back payloads once nothing refers to them: their blocks may
// then serve another stream. One lock for a batch.
func (r *reader) put(cs []upChunk) {
	if len(cs) == 0 {
		return
	}
	r.mu.Lock()
	for _, c := range cs {
		if c.blk != nil {
			c.blk.live--
			r.recycle(c.blk)
		}
	}
	r.mu.Unlock()
}

func getQueue() []upChunk { return (*queuePool.Get().(*[]upChunk))[:0] }

// putQueue pools q, of which the first used entries were written.
func putQueue(q []upChunk, used int) {
	if cap(q) == 0 || cap(q) > 4*queueCap {
		return
	}
	clear(q[:min(used, cap(q))]) // drop the payloads it points to
	q = q[:0]
	queuePool.Put(&q)
}

// release gives the queues back once the attempt is over and the reader
// has stopped (done is closed): nothing may use the reader after it.
func (r *reader) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	putQueue(r.q, r.qMax)
	putQueue(r.spare, r.qMax)
	r.q, r.spare = nil, nil
}

// take returns the queued payloads, valid until the next take; the queue
// goes on in the slice the previous take returned, so that taking
// allocates nothing.
func (r *reader) take() []upChunk {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.q
	r.q, r.spare, r.qBytes = r.spare[:0], q, 0
	r.took += len(q)
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
	r.took -= len(q)
	r.q = append(append([]upChunk(nil), q...), r.q...)
	r.qMax = max(r.qMax, len(r.q))
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

// taken is the number of payloads the gateway has taken and kept.
func (r *reader) taken() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.took
}

// lastArrival is when the upstream last sent something.
func (r *reader) lastArrival() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

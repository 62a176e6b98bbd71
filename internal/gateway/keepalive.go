package gateway

import (
	"time"

	"github.com/aegis-sentinel/aegis/internal/clock"
)

// DefaultKeepAlive is the silence after which a held stream gets a
// keep-alive comment.
const DefaultKeepAlive = 15 * time.Second

// keepAliveComment is the Server-Sent Events comment a held stream gets:
// clients and proxies see bytes, parsers skip it.
const keepAliveComment = ": aegis: checking\n\n"

// keepAliveEvery is the keep-alive silence: KeepAlive, DefaultKeepAlive
// when zero, none when negative.
func (g *Gateway) keepAliveEvery() time.Duration {
	switch {
	case g.KeepAlive < 0:
		return 0
	case g.KeepAlive == 0:
		return DefaultKeepAlive
	}
	return g.KeepAlive
}

// commenter is a wire whose stream carries comments (Server-Sent Events).
// NDJSON (Ollama's API) has none: every line is a JSON object its
// clients parse, so a held Ollama stream stays silent.
type commenter interface{ appendComment(dst []byte) []byte }

func (sseWire) appendComment(dst []byte) []byte { return append(dst, keepAliveComment...) }

// keepAlive is the timer that sends a comment on a streamed answer when
// the client waits on the gateway and nothing was written for a while:
// proxies and clients with idle timeouts then keep the stream while a
// guard judges or a JSON answer is buffered. Never on an answer that is
// not streamed (a JSON body) nor on one choice of several.
type keepAlive struct {
	t     clock.Timer
	at    time.Time // when t fires
	every time.Duration
	c     commenter
}

// startKeepAlive returns the keep-alive timer of the attempt, or nil when
// the answer gets none.
func (x *exchange) startKeepAlive(clk clock.Clock) *keepAlive {
	every := x.g.keepAliveEvery()
	if every <= 0 || !x.req.stream || x.ended != nil {
		return nil
	}
	c, ok := x.route.(commenter)
	if !ok {
		return nil
	}
	k := &keepAlive{every: every, c: c}
	k.at = x.lastWrite().Add(every)
	d := k.at.Sub(clk.Now())
	if d <= 0 {
		d = time.Nanosecond
	}
	k.t = clk.NewTimer(d)
	return k
}

// lastWrite is when the client last got bytes, or the request's arrival.
func (x *exchange) lastWrite() time.Time {
	if x.out.lastWrite.IsZero() {
		return x.start
	}
	return x.out.lastWrite
}

// C fires when the silence may have lasted long enough; nil (never) for a
// nil keepAlive.
func (k *keepAlive) C() <-chan time.Time {
	if k == nil {
		return nil
	}
	return k.t.C()
}

// due is when the timer fires; zero for a nil keepAlive.
func (k *keepAlive) due() time.Time {
	if k == nil {
		return time.Time{}
	}
	return k.at
}

func (k *keepAlive) stop() {
	if k != nil {
		k.t.Stop()
	}
}

// keepAliveFired sends a comment when the client got nothing for the
// keep-alive silence while it waits on the gateway (text is held, or a
// hidden retry is under way, tool calls wait for approval), and arms the timer for the next one. The
// silence is measured on the gateway's clock, which times the writes: the
// reader's clock, which stops while the reader waits for queue space,
// would stretch it.
func (x *exchange) keepAliveFired(k *keepAlive) {
	now := x.g.now()
	last := x.lastWrite()
	if now.Sub(last) >= k.every {
		if x.holds() {
			x.out.comment(k.c)
		}
		last = now
	}
	k.at = last.Add(k.every)
	k.t.Reset(k.at.Sub(now))
}

// holds reports whether the client waits on the gateway: text or
// reasoning held back, tool calls held for their verdict, or a hidden
// retry under way.
func (x *exchange) holds() bool {
	return len(x.out.text) > x.out.sent || len(x.cur.heldTool) > 0 || x.tally.attempts > 1 || x.tally.holding
}

// comment writes a keep-alive comment, and the stream's header first when
// nothing was written yet: the status is 200 from then on, and a halt
// arrives as the stream's error event.
func (r *releaser) comment(c commenter) {
	if !r.wroteHeader {
		r.writeStreamHeader()
	}
	if r.out == nil {
		r.outBuf = outPool.Get().(*[]byte)
		r.out = (*r.outBuf)[:0]
	}
	r.out = c.appendComment(r.out)
	r.flush()
}

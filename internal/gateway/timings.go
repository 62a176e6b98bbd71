package gateway

import "github.com/aegis-sentinel/aegis/internal/events"

// timed adds the request's timings so far to e (a Retry or Halt): the
// incident log records a hidden retry with what the request had cost when
// it was retried, as RequestFinished gives them for the whole request.
func (x *exchange) timed(e events.Event) events.Event {
	now := x.g.now()
	e.Duration = now.Sub(x.start)
	e.HeldBytes = x.heldMax
	if !x.firstOut.IsZero() {
		e.TTFT = x.firstOut.Sub(x.start)
		if !x.firstUp.IsZero() {
			e.AddedTTFT = x.firstOut.Sub(x.firstUp)
		}
	}
	if !x.lastUp.IsZero() {
		e.VerdictDelay = now.Sub(x.lastUp)
	}
	return e
}

package gateway

import (
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// next is what follows a failed attempt.
type next int

const (
	nextHalt  next = iota // answer with the verdict's error
	nextRetry             // a hidden retry on the same upstream
	nextProbe             // a stall: retry once, on this upstream if it is healthy, else on a fallback
)

func (n next) String() string {
	switch n {
	case nextHalt:
		return "halt"
	case nextRetry:
		return "retry"
	case nextProbe:
		return "probe"
	}
	return fmt.Sprintf("next(%d)", int(n))
}

// sofar is what the decision after an attempt depends on besides the
// verdict (which the policy made).
type sofar struct {
	attempts, maxAttempts int
	// optimisticSent: optimistic release already gave the client text.
	optimisticSent bool
	stallRetried   bool
	// capped: the response passed the gateway's memory cap; a retry
	// would only produce as much again.
	capped bool
}

// decideNext decides what follows a failed attempt: a pure function of
// the policy's verdict (its action carries the retry budgets) and the
// request's state.
func decideNext(v validator.Verdict, s sofar) next {
	switch {
	case !v.Action.IsRetry(), s.attempts >= s.maxAttempts, s.capped:
		return nextHalt
	case s.optimisticSent:
		// The client has seen text a check rejected: no repair can hide it.
		return nextHalt
	case v.Reason == validator.ReasonStall && s.stallRetried:
		return nextHalt
	case v.Reason == validator.ReasonStall:
		return nextProbe
	}
	return nextRetry
}

package gateway

import (
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// resultKind is how one attempt ended.
type resultKind int

const (
	resPass      resultKind = iota // the output passed and was released
	resFail                        // a check (or the stall watchdog) failed it
	resCancelled                   // the client went away
	resRefused                     // the upstream refused before streaming
)

// result is how one attempt ended, with its verdict.
type result struct {
	kind    resultKind
	verdict validator.Verdict
	// status and body are the upstream's refusal (resRefused); status 0
	// means it could not be reached.
	status int
	body   []byte
	err    error
}

func (r *result) errMessage() string {
	switch {
	case r.err != nil:
		return r.err.Error()
	case r.status != 0:
		return fmt.Sprintf("upstream answered %d: %q", r.status, clip(r.body, 300))
	}
	return "upstream error"
}

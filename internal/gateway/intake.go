package gateway

import (
	"fmt"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// intakeError is a payload the attempt cannot take: the upstream's
// failure (err), or, when over is set, the response cap it passed.
type intakeError struct {
	err  error
	over validator.Finding
}

func (e *intakeError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return e.over.Message
}

func (e *intakeError) Unwrap() error { return e.err }

// intake reads one upstream payload p of attempt n into c: parsed, with
// what is not valid UTF-8 replaced, held to the response cap, and, when a
// hidden retry's chunk, restamped with the identity of the answer the
// client has. It returns the payload as the client may get it. The
// attempt loop and the local repair read every payload through it.
func (x *exchange) intake(p []byte, c *chunk, n int) ([]byte, *intakeError) {
	err := x.route.parse(p, c)
	if err == nil && needsRepair(c.unvetted()) {
		p = x.validUTF8(p)
		err = x.route.parse(p, c)
	}
	if err != nil {
		return p, &intakeError{err: err}
	}
	if f, over := x.overCap(c); over {
		return p, &intakeError{over: f}
	}
	if c.errMsg != "" {
		return p, &intakeError{err: fmt.Errorf("upstream error in stream: %q", c.errMsg)}
	}
	x.tpl.learn(c, n)
	if x.route.foreign(&x.tpl, c, n) {
		p = x.tpl.restamp(p) // a hidden retry continues the first attempt's answer
	}
	return p, nil
}

// overCap reports whether the chunk c would take the response past
// MaxResponseBytes, with the finding that fails the attempt (the policy
// halts it: a retry would only produce as much again).
func (x *exchange) overCap(c *chunk) (validator.Finding, bool) {
	limit := x.g.maxResponse()
	if len(x.out.text)+len(c.text)+len(c.reasoning) <= limit {
		return validator.Finding{}, false
	}
	return validator.Finding{Check: "gateway", Reason: validator.ReasonLengthExceeded, Start: len(x.out.text), End: len(x.out.text),
		Message: fmt.Sprintf("the response passed max_response_bytes (%d bytes)", limit)}, true
}

package gateway

import (
	"errors"
	"io"

	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax"
)

// fixSyntax applies the fix_syntax repair locally, without a round trip:
// when the attempt failed on a JSON error that jsonsyntax.Repair can fix
// (a trailing comma, single quotes, a code fence), nothing was released
// yet and no tool call is involved, it reads the rest of the answer, repairs
// it, and runs a fresh set of checks over the repaired document. When they
// pass, the repaired document is the answer; otherwise (the repair did not
// apply, the answer was cut off by the token limit, the checks still fail)
// it reports false and the request is retried as the policy says.
func (x *exchange) fixSyntax(chk Checker, next func() ([]byte, error), n int) (result, bool) {
	v := chk.Verdict(n)
	f, ok := syntaxFinding(v)
	if !ok || x.out.sent > 0 || x.cur.tools.hasCalls() || !x.g.policy().Rule(v.Reason).Action.IsRetry() {
		return result{}, false
	}
	if err := x.drainRest(next, n); err != nil {
		return result{}, false
	}
	if x.cur.finish == "length" {
		return result{}, false // cut off: closing it would invent the end
	}
	fixed, ok := jsonsyntax.Repair(x.out.text)
	if !ok {
		return result{}, false
	}
	again, err := x.g.newChecker(x.req.vreq)
	if err != nil {
		return result{}, false
	}
	defer again.Stop()
	now := x.g.now()
	again.Feed(fixed, now)
	if st := again.CloseAt(now); st.State != pipeline.Done || st.Failed {
		return result{}, false // a check that judges later (a guard) cannot clear it here
	}
	x.out.replace(fixed)
	x.tally.repaired = true
	out := again.Verdict(n)
	out.Findings = append(out.Findings, validator.Finding{Check: f.Check, Start: f.Start, End: f.End,
		Message: "repaired locally (fix_syntax): " + f.Message})
	return result{kind: resPass, verdict: out}, true
}

// syntaxFinding returns the failing finding of v when it is a JSON error
// with the fix_syntax hint.
func syntaxFinding(v validator.Verdict) (validator.Finding, bool) {
	if v.Verdict != validator.Fail || v.Reason != validator.ReasonInvalidJSON && v.Reason != validator.ReasonSchemaViolation {
		return validator.Finding{}, false
	}
	for _, f := range v.Findings {
		if f.Reason == v.Reason {
			return f, f.Hint == validator.ActionFixSyntax
		}
	}
	return validator.Finding{}, false
}

var errToolInDrain = errors.New("tool call")

// drainRest reads the rest of the attempt's answer, through the same
// intake as the attempt's chunks, into the output text and its closing
// chunks into the attempt's tail, without checks.
func (x *exchange) drainRest(next func() ([]byte, error), n int) error {
	var c chunk
	for {
		p, err := next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p, ierr := x.intake(p, &c, n)
		if ierr != nil {
			return ierr
		}
		switch {
		case c.hasTools:
			return errToolInDrain
		case c.hasText:
			x.out.extend(c.text)
			if c.finish {
				x.cur.keepTail(nil, &c)
			}
		case c.finish || x.cur.finish != "":
			x.cur.keepTail(p, &c)
		}
	}
}

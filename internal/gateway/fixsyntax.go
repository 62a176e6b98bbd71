package gateway

import (
	"errors"
	"io"

	"github.com/aegis-sentinel/aegis/internal/pipeline"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
	"github.com/aegis-sentinel/aegis/internal/validator/jsonsyntax"
)

// fixSyntax applies the fix_syntax repair locally, without a round trip,
// once the policy chose it (Next: a JSON error that jsonsyntax.Repair can
// fix, a trailing comma, single quotes, a code fence; nothing released
// yet, no tool call): it reads the rest of the answer, repairs it, and
// runs a fresh set of checks over the repaired document. When they pass,
// the repaired document is the answer; otherwise (the repair did not
// apply, the answer was cut off by the token limit, the checks still
// fail) it reports false and the request is retried as the policy says.
func (x *exchange) fixSyntax(v validator.Verdict, next func() ([]byte, error), n int) (result, bool) {
	f, _ := policy.SyntaxFinding(v)
	if err := x.drainRest(next, n); err != nil {
		return result{}, false
	}
	if x.cur.finish == "length" {
		return result{}, false // cut off: closing it would invent the end
	}
	if len(x.out.rsn) > 0 {
		return result{}, false // the text holds reasoning: the answer is not the text alone
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
	x.noteRepair(f.Reason)
	out := again.Verdict(n)
	out.Findings = append(out.Findings, validator.Finding{Check: f.Check, Start: f.Start, End: f.End,
		Message: "repaired locally (fix_syntax): " + f.Message})
	return result{kind: resPass, verdict: out}, true
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

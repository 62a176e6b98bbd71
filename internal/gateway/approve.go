package gateway

import (
	"fmt"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// approvable reports whether the policy sends a failed attempt's verdict
// to a person: an approve verdict over tool calls the gateway holds.
func (x *exchange) approvable(v validator.Verdict) bool {
	return x.g.policy().Next(v, x.sofar(true)) == policy.Approve
}

// awaitApproval holds the attempt's tool calls until a person decides
// (Gateway.Approvals), the policy's approval timeout denies them, or the
// client leaves. A streamed answer gets keep-alive comments meanwhile.
// Approved calls that still hash to what was approved, under the same
// policy version, go out as a pass would send them; anything else halts
// with the verdict's reason. The proposal, the decision and the release
// are three events.
func (x *exchange) awaitApproval(v validator.Verdict) {
	pol := x.g.policy()
	calls := x.cur.tools.calls()
	now := x.g.now()
	rec := events.ApprovalRecord{RequestID: x.id, Time: now, Deadline: now.Add(pol.ApprovalTimeout()),
		Calls: approval.Describe(calls), Reason: string(v.Reason), Rule: x.ruleText(v),
		ArgsHash: approval.ArgsHash(calls), PolicyVersion: pol.Version}
	q := x.g.Approvals
	if q == nil {
		x.halt(withApprovalNote(v, "no one can approve tool calls on this gateway: the call is refused"))
		return
	}
	t := q.Hold(rec)
	rec = t.Record
	x.publishApproval(rec)

	clk := x.g.clock()
	timer := clk.NewTimer(pol.ApprovalTimeout())
	defer timer.Stop()
	x.tally.holding = true
	ka := x.startKeepAlive(clk)
	defer ka.stop()
	for {
		if h := x.g.waitHook; h != nil {
			h(loopState{ended: true, keepAlive: ka.due(), approval: rec.ID})
		}
		select {
		case o := <-t.Done():
			x.decided(v, rec, o)
			return
		case <-timer.C():
			if q.Expire(t) {
				x.decided(v, rec, <-t.Done())
				return
			}
		case <-ka.C():
			x.keepAliveFired(ka)
		case <-x.r.Context().Done():
			q.Cancel(t)
			if o := <-t.Done(); o.Stage != approval.Cancelled {
				rec.Stage, rec.By = o.Stage.String(), o.By
				x.publishApproval(rec)
			}
			rec.Stage, rec.By = approval.Cancelled.String(), ""
			x.publishApproval(rec)
			x.finished(events.OutcomeCancelled, 0)
			return
		}
	}
}

// decided acts on how the held calls were decided.
func (x *exchange) decided(v validator.Verdict, rec events.ApprovalRecord, o approval.Outcome) {
	rec.Stage, rec.By = o.Stage.String(), o.By
	x.publishApproval(rec)
	x.tally.holding = false
	var why string
	switch o.Stage {
	case approval.Approved:
		// The approval names what it approved: the calls released must
		// be those, under the policy that asked.
		if o.ArgsHash == approval.ArgsHash(x.cur.tools.calls()) && o.PolicyVersion == x.g.policy().Version {
			pv := v
			pv.Verdict, pv.Action, pv.Reason = validator.Pass, validator.ActionRelease, validator.ReasonNone
			pv.Findings = append(append([]validator.Finding(nil), v.Findings...), validator.Finding{Check: "approval", Path: "tool_calls",
				Message: fmt.Sprintf("released after approval %s by %s", rec.ID, cmpOr(o.By, "a person"))})
			x.pass(pv)
			rec.Stage = approval.Released.String()
			x.publishApproval(rec)
			return
		}
		why = fmt.Sprintf("approval %s names other arguments or another policy version than the held call: the call is refused", rec.ID)
	case approval.Expired:
		why = fmt.Sprintf("nobody decided on the held tool call within %s (approval %s): the call is refused", x.g.policy().ApprovalTimeout(), rec.ID)
	default:
		why = fmt.Sprintf("a person denied the held tool call (approval %s, by %s)", rec.ID, cmpOr(o.By, "a person"))
	}
	x.halt(withApprovalNote(v, why))
}

// withApprovalNote puts the approval's end first among v's findings, so
// the halt's message says what happened.
func withApprovalNote(v validator.Verdict, why string) validator.Verdict {
	f := validator.Finding{Check: "approval", Reason: v.Reason, Path: "tool_calls", Message: why}
	v.Findings = append([]validator.Finding{f}, v.Findings...)
	return v
}

// ruleText is what the rule that asked for approval said: the messages
// of the findings with the verdict's reason, their quotes redacted unless
// the policy allows logging text.
func (x *exchange) ruleText(v validator.Verdict) string {
	var parts []string
	for _, f := range v.Findings {
		if f.Reason != v.Reason || f.Message == "" {
			continue
		}
		m := x.g.scrub(f.Message)
		if !x.req.logText {
			m = RedactQuotes(m)
		}
		parts = append(parts, f.Check+": "+m)
	}
	return strings.Join(parts, "; ")
}

func (x *exchange) publishApproval(rec events.ApprovalRecord) {
	ev := x.event(events.Approval)
	ev.Approval = &rec
	x.publish(ev)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

package gateway

import (
	"strconv"
	"strings"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// toolOutcomes says, for each tool call of the attempt judged by v, which
// tool it called and what became of it.
func (x *exchange) toolOutcomes(v validator.Verdict) []events.ToolCall {
	if !x.cur.tools.hasCalls() {
		return nil
	}
	calls := x.cur.tools.calls()
	out := make([]events.ToolCall, 0, len(calls))
	for _, c := range calls {
		name := "undeclared"
		for _, t := range x.req.vreq.Tools {
			if t.Name == c.Name {
				name = c.Name
				break
			}
		}
		outcome := events.ToolDropped
		if v.Verdict == validator.Pass {
			outcome = events.ToolReleased
		}
		at := "tool_calls/" + strconv.Itoa(c.Index)
		for _, f := range v.Findings {
			if f.Reason != validator.ReasonNone && (f.Path == at || strings.HasPrefix(f.Path, at+"/")) {
				outcome = events.ToolRefused
				break
			}
		}
		out = append(out, events.ToolCall{Tool: name, Outcome: outcome})
	}
	return out
}

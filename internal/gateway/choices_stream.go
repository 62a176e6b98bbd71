package gateway

import (
	"net/http"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/sse"
)

// runChoicesStream serves a streaming request for n choices as n upstream
// requests of one choice, one after another, each through its own checks:
// their chunks go out on one stream, each carrying the choice's index and
// the first choice's id, as an n-choice stream does (each choice's
// releaser writes them so: choiceOpt). A choice that halts ends the
// stream with its error event.
func (x *exchange) runChoicesStream(n int) {
	body := x.req.body.clone()
	delete(body, "n")
	shared := &sharedStream{}
	outcome := events.OutcomeReleased
	for i := 0; i < n; i++ {
		var end ending
		req := x.req
		req.body, req.raw = body, nil
		sub := &exchange{g: x.g, w: x.w, r: x.r, route: x.route, id: x.id, start: x.start, req: req, up: x.up, ended: &end}
		sub.out.choice = &choiceOpt{index: i, stream: shared}
		sub.run()
		sub.out.recycle()
		x.tally.attempts += sub.tally.attempts
		if !shared.started {
			// The first choice failed before its stream began: its plain
			// HTTP error is the answer.
			x.finished(end.outcome, end.status)
			return
		}
		switch end.outcome {
		case events.OutcomeRepaired:
			outcome = events.OutcomeRepaired
		case events.OutcomeReleased:
		default:
			outcome = end.outcome
		}
		if outcome != events.OutcomeReleased && outcome != events.OutcomeRepaired {
			break
		}
	}
	x.w.Write(sse.AppendDone(nil))
	if f, ok := x.w.(http.Flusher); ok {
		f.Flush()
	}
	x.finished(outcome, http.StatusOK)
}

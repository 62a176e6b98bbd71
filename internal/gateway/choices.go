package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// runChoices serves a non-streaming request for n choices as n upstream
// requests of one choice each (llama-server and Ollama give one choice
// per request), every one through its own checks, retries and verdict,
// then answers with the n choices in one body, which the dialect
// assembles from the choices' answers (none is encoded and read again). The first choice that
// halts halts the request with its error: a client asking for n choices
// gets n, or an error.
func (x *exchange) runChoices(n int) {
	body := x.req.body.clone()
	delete(body, "n")
	var (
		top      rawBody
		answers  []*output
		attempts int
		repaired bool
		usage    map[string]int
		last     *meta
	)
	for i := 0; i < n; i++ {
		res := &subResult{header: http.Header{}, ended: ending{collect: true}}
		req := x.req
		req.body, req.raw = body, nil
		sub := &exchange{g: x.g, w: res, r: x.r, route: x.route, id: x.id, start: x.start, req: req, up: x.up, ended: &res.ended}
		sub.run()
		x.tally.attempts += sub.tally.attempts
		attempts += sub.tally.attempts
		a := res.ended.kept
		if a == nil { // the choice did not pass: its error is the answer
			for k, v := range res.header {
				x.w.Header()[k] = v
			}
			x.w.Header().Set(HeaderAttempts, strconv.Itoa(attempts))
			if res.status != 0 {
				x.w.WriteHeader(res.status)
				x.w.Write(res.body.Bytes())
			}
			x.finished(res.ended.outcome, res.status)
			return
		}
		answers = append(answers, a.out)
		usage = addUsage(usage, a.top["usage"], i > 0)
		last = a.meta
		repaired = repaired || res.ended.outcome == events.OutcomeRepaired
		for _, r := range sub.tally.repairedFor {
			x.noteRepair(r)
		}
		if top == nil {
			top = a.top // the first choice's closing members and identity
		}
	}
	if usage != nil {
		if _, ok := usage["prompt_tokens"]; ok {
			usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
		}
		top.set("usage", usage)
	}
	merged := x.route.body(top, answers...)
	if last == nil {
		last = x.meta(validator.Verdict{Verdict: validator.Pass})
	}
	last.Attempts, last.Repaired = attempts, x.repairedReasons(last.Verdict)
	merged.set("aegis", last)
	setVerdictHeaders(x.w.Header(), last)
	writeJSON(x.w, http.StatusOK, merged)
	outcome := events.OutcomeReleased
	if repaired {
		outcome = events.OutcomeRepaired
	}
	x.tally.repaired = repaired
	x.finished(outcome, http.StatusOK)
}

// addUsage adds the counts of one choice's usage to sum; the prompt is
// counted once (again: a later choice).
func addUsage(sum map[string]int, raw json.RawMessage, again bool) map[string]int {
	var u map[string]json.RawMessage
	json.Unmarshal(raw, &u)
	for k, v := range u {
		var c int
		if json.Unmarshal(v, &c) == nil {
			if sum == nil {
				sum = map[string]int{}
			}
			if k == "prompt_tokens" && again {
				continue
			}
			sum[k] += c
		}
	}
	return sum
}

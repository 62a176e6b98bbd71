package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// subResult is what one choice's exchange ended with.
type subResult struct {
	outcome string
	status  int
	header  http.Header
	body    bytes.Buffer
}

func (s *subResult) Header() http.Header { return s.header }
func (s *subResult) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.body.Write(p)
}
func (s *subResult) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}

// runChoices serves a non-streaming request for n choices as n upstream
// requests of one choice each (llama-server and Ollama give one choice
// per request), every one through its own checks, retries and verdict,
// then answers with the n choices in one body. The first choice that
// halts halts the request with its error: a client asking for n choices
// gets n, or an error.
func (x *exchange) runChoices(n int) {
	body := x.req.body.clone()
	delete(body, "n")
	var (
		merged   rawBody
		choices  []json.RawMessage
		attempts int
		repaired bool
		usage    map[string]int
		last     *meta
	)
	for i := 0; i < n; i++ {
		res := &subResult{header: http.Header{}}
		req := x.req
		req.body = body
		sub := &exchange{g: x.g, w: res, r: x.r, route: x.route, id: x.id, start: x.start, req: req, up: x.up, ended: &res.outcome}
		sub.run()
		x.tally.attempts += sub.tally.attempts
		attempts += sub.tally.attempts
		if res.status != http.StatusOK {
			for k, v := range res.header {
				x.w.Header()[k] = v
			}
			x.w.Header().Set(HeaderAttempts, strconv.Itoa(attempts))
			x.w.WriteHeader(res.status)
			x.w.Write(res.body.Bytes())
			x.finished(res.outcome, res.status)
			return
		}
		var b rawBody
		if err := json.Unmarshal(res.body.Bytes(), &b); err != nil {
			x.reject(http.StatusInternalServerError, apiError{Message: "assembling choices: " + err.Error(), Type: "server_error", Code: "aegis_error"})
			return
		}
		var cs []rawBody
		json.Unmarshal(b["choices"], &cs)
		for _, c := range cs {
			c.set("index", len(choices))
			choices = append(choices, c.encode())
		}
		var u map[string]json.RawMessage
		json.Unmarshal(b["usage"], &u)
		for k, v := range u {
			var c int
			if json.Unmarshal(v, &c) == nil {
				if usage == nil {
					usage = map[string]int{}
				}
				if k == "prompt_tokens" && i > 0 {
					continue // the prompt is counted once
				}
				usage[k] += c
			}
		}
		var m meta
		if json.Unmarshal(b["aegis"], &m) == nil {
			last = &m
		}
		repaired = repaired || res.outcome == events.OutcomeRepaired
		if merged == nil {
			merged = b
		}
	}
	merged.set("choices", choices)
	if usage != nil {
		if _, ok := usage["prompt_tokens"]; ok {
			usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
		}
		merged.set("usage", usage)
	}
	if last == nil {
		last = x.meta(validator.Verdict{Verdict: validator.Pass})
	}
	last.Attempts, last.Repaired = attempts, repaired
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

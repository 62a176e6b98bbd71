package gateway

import (
	"encoding/json"
)

// The token budget of a repaired answer. The client's max_tokens is for
// the whole answer it reads; a hidden retry that continues the released
// text may generate only what is left of it, and the usage the client
// gets counts the released prefix as generated, not as prompt.
//
// Tokens are counted as the upstream's text chunks: llama-server and
// Ollama stream one token per chunk. A chunk cut by the release point
// counts as one released token. The releaser keeps the token offsets
// (accept) and carries them over (carryTokens).

// shrinkBudget lowers the token limit of a retry's body b by the tokens
// the client already has, never below one.
func (x *exchange) shrinkBudget(b rawBody) {
	if x.out.carried == 0 {
		return
	}
	x.route.shrinkBudget(b, x.out.carried)
}

// adjustUsage rewrites the usage counts of the closing chunks of a
// repaired answer: the carried tokens were sent as a prefill (prompt) but
// the client received them as generated text.
func (x *exchange) adjustUsage() {
	if x.out.carried == 0 {
		return
	}
	for i, p := range x.cur.tail {
		var m rawBody
		if json.Unmarshal(p, &m) != nil || m == nil {
			continue
		}
		changed := false
		if u := m.object("usage"); len(m["usage"]) > 0 && string(m["usage"]) != "null" {
			if moveCount(u, "prompt_tokens", "completion_tokens", x.out.carried) {
				capCached(u)
				m.set("usage", u)
				changed = true
			}
		}
		if moveCount(m, "prompt_eval_count", "eval_count", x.out.carried) {
			changed = true
		}
		if changed {
			x.cur.tail[i] = m.encode()
		}
	}
}

// moveCount moves n from the count under from to the count under to,
// when o has both; it reports whether it changed o.
func moveCount(o rawBody, from, to string, n int) bool {
	var a, b int
	if json.Unmarshal(o[from], &a) != nil || json.Unmarshal(o[to], &b) != nil {
		return false
	}
	o.set(from, max(a-n, 0))
	o.set(to, b+n)
	return true
}

// capCached keeps usage.prompt_tokens_details.cached_tokens within
// prompt_tokens once the carried tokens left the prompt count: the
// upstream cached the prefill too, which the client counts as completion.
func capCached(u rawBody) {
	var prompt, cached int
	d := u.object("prompt_tokens_details")
	if json.Unmarshal(u["prompt_tokens"], &prompt) != nil || d == nil || json.Unmarshal(d["cached_tokens"], &cached) != nil {
		return
	}
	if cached > prompt {
		d.set("cached_tokens", prompt)
		u.set("prompt_tokens_details", d)
	}
}

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
// counts as one released token.

// tokenSpan is the output offsets of one upstream text chunk.
type tokenSpan struct{ start, end int }

// noteToken records a text chunk at output offsets [start, end).
func (x *exchange) noteToken(start, end int) {
	x.tokens = append(x.tokens, tokenSpan{start, end})
}

// carryTokens is called when an attempt failed and another continues the
// released prefix: it adds the released chunks of the failed attempt to
// the tokens carried over, and forgets the rest.
func (x *exchange) carryTokens() {
	for _, s := range x.tokens {
		if s.start < x.sent {
			x.carried++
		}
	}
	x.tokens = x.tokens[:0]
}

// shrinkBudget lowers the token limit of a retry's body b by the tokens
// the client already has, never below one.
func (x *exchange) shrinkBudget(b rawBody) {
	if x.carried == 0 {
		return
	}
	x.route.shrinkBudget(b, x.carried)
}

// adjustUsage rewrites the usage counts of the closing chunks of a
// repaired answer: the carried tokens were sent as a prefill (prompt) but
// the client received them as generated text.
func (x *exchange) adjustUsage() {
	if x.carried == 0 {
		return
	}
	for i, p := range x.tail {
		var m rawBody
		if json.Unmarshal(p, &m) != nil || m == nil {
			continue
		}
		changed := false
		if u := m.object("usage"); len(m["usage"]) > 0 && string(m["usage"]) != "null" {
			if moveCount(u, "prompt_tokens", "completion_tokens", x.carried) {
				m.set("usage", u)
				changed = true
			}
		}
		if moveCount(m, "prompt_eval_count", "eval_count", x.carried) {
			changed = true
		}
		if changed {
			x.tail[i] = m.encode()
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

package llm

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// CheckNative asks a guard model in its own protocol p (a native protocol,
// not auto or verdict-json) whether s is unsafe.
//
// On llama-server it asks in two grammar-constrained steps sharing the
// cached prompt, as Check does: the first generates only the decision
// word's first token with n_probs alternatives, which gives the
// probability of the failing words against the passing ones at the
// deciding position (the model cards' own risk score); the second, only
// for a failing word, continues with the grammar of the rest of the
// model's answer (its categories, a refusal line). On Ollama, which takes
// no grammar and reports no probabilities, the model answers freely and
// its first lines are parsed.
func (c *Client) CheckNative(ctx context.Context, p Protocol, s Subject) (*Result, error) {
	n := nativeOf(p)
	if n == nil {
		return nil, fmt.Errorf("guard llm: %s is not a native protocol", p)
	}
	start := time.Now()
	var res *Result
	var err error
	if c.Kind == KindOllama {
		res, err = c.nativeOllama(ctx, n, s)
	} else {
		res, err = c.nativeLlama(ctx, p, s, start)
	}
	if err != nil {
		return nil, err
	}
	res.Protocol = p
	res.Verdict = verdictFrom(n, s, res.Answer)
	if !res.HasProbs {
		res.PFail = 0
		if res.Verdict.Verdict == validator.Fail {
			res.PFail = 1
		}
	}
	if res.HasProbs && res.Answer.Unsafe {
		res.Verdict.Risk = riskFromProb(res.PFail)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

func (c *Client) nativeLlama(ctx context.Context, p Protocol, s Subject, start time.Time) (*Result, error) {
	n := nativeOf(p)
	nprobs := c.NProbs
	if nprobs <= 0 {
		nprobs = 512
	}
	pr := c.NativePrompt(ctx, p, s)
	base := pr.Prefix + pr.Suffix + n.open()
	fail, pass := decisionWords(n, s)
	var alts []string
	for _, w := range append(append([]string(nil), fail...), pass...) {
		alts = append(alts, gbnfLit(w))
	}
	var first completion
	err := c.post(ctx, "/completion", map[string]any{
		"prompt": base, "grammar": "root ::= " + strings.Join(alts, " | "), "n_predict": 1, "n_probs": nprobs,
		"cache_prompt": true, "id_slot": c.slot(), "temperature": 0, "stream": false,
	}, &first)
	if err != nil {
		return nil, err
	}
	res := &Result{CachedTokens: first.Timings.CacheN, Decided: time.Since(start)}
	res.add(first.Timings)
	res.PFail, res.HasProbs, res.Approx = decisionProb(first, fail, pass)
	word := wordOf(first.Content, fail, pass)
	if word == "" {
		return nil, fmt.Errorf("guard llm: first answer token %q starts no decision word", first.Content)
	}
	text := n.open() + word
	if isIn(word, fail) {
		if g, max := n.rest(s, word); g != "" {
			var rest completion
			err := c.post(ctx, "/completion", map[string]any{
				"prompt": base + word, "grammar": g, "n_predict": max,
				"cache_prompt": true, "id_slot": c.slot(), "temperature": 0, "stream": false,
			}, &rest)
			if err != nil {
				return nil, err
			}
			res.add(rest.Timings)
			text += rest.Content
		}
	} else {
		// A passing word decides the whole answer; what the model would
		// add after it (Qwen3Guard's "Categories: None", its refusal line)
		// is not asked for, so it is not reported.
		res.Text, res.Answer = text, Answer{Label: word}
		return res, nil
	}
	res.Text = text
	if res.Answer, err = n.parse(s, text); err != nil {
		return nil, fmt.Errorf("guard llm: %w", err)
	}
	return res, nil
}

func (c *Client) nativeOllama(ctx context.Context, n native, s Subject) (*Result, error) {
	pr := wirePrompt(n, s)
	_, limit := n.grammar(s)
	// The bound is in bytes; a real guard's answer is a few tokens and
	// ends with its end-of-turn token, so a free answer is cut short.
	limit = min(limit, ollamaAnswerTokens)
	var out struct {
		Response        string `json:"response"`
		PromptEvalCount int    `json:"prompt_eval_count"`
		EvalCount       int    `json:"eval_count"`
	}
	err := c.post(ctx, "/api/generate", map[string]any{
		"model": c.Model, "prompt": pr.Prefix + pr.Suffix + n.open(), "raw": true, "stream": false,
		"options": map[string]any{"temperature": 0, "num_predict": limit},
	}, &out)
	if err != nil {
		return nil, err
	}
	text := n.open() + out.Response
	ans, err := parseLeading(n, s, text)
	if err != nil {
		return nil, fmt.Errorf("guard llm: %w", err)
	}
	return &Result{Answer: ans, Text: text, PromptTokens: out.PromptEvalCount, Predicted: out.EvalCount}, nil
}

// ollamaAnswerTokens caps a free answer on Ollama.
const ollamaAnswerTokens = 32

// parseLeading parses the longest run of leading lines of an unconstrained
// answer that is a whole answer (the model may go on after it).
func parseLeading(n native, s Subject, text string) (Answer, error) {
	lines := strings.Split(strings.TrimRight(text, " \n"), "\n")
	var firstErr error
	for k := len(lines); k > 0; k-- {
		a, err := n.parse(s, strings.Join(lines[:k], "\n"))
		if err == nil {
			return a, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("empty guard answer")
	}
	return Answer{}, firstErr
}

// decisionWords are the words that fail and pass s: in loose mode
// Qwen3Guard's Controversial passes.
func decisionWords(n native, s Subject) (fail, pass []string) {
	fail, pass = n.words()
	if _, ok := n.(qwen3Guard); ok && s.Loose {
		return []string{"Unsafe"}, []string{"Safe", "Controversial"}
	}
	return fail, pass
}

// wordOf returns the decision word the generated token starts.
func wordOf(tok string, fail, pass []string) string {
	for _, w := range append(append([]string(nil), fail...), pass...) {
		if tok != "" && (strings.HasPrefix(w, tok) || strings.HasPrefix(tok, w)) {
			return w
		}
	}
	return ""
}

func isIn(w string, ws []string) bool {
	for _, x := range ws {
		if x == w {
			return true
		}
	}
	return false
}

// decisionProb is P(fail words)/(P(fail words)+P(pass words)) at the first
// answer token, from the pre-sampling probabilities llama-server reported.
// When only one side is among the alternatives, the other is bounded by
// the smallest reported probability and approx is set.
func decisionProb(out completion, fail, pass []string) (pFail float64, ok, approx bool) {
	if len(out.Probs) == 0 {
		return 0, false, false
	}
	return splitProb(out.Probs[0].tokenProb, out.Probs[0].Top, func(tok string) (f, p bool) {
		switch w := wordOf(tok, fail, pass); {
		case w == "":
			return false, false
		case isIn(w, fail):
			return true, false
		}
		return false, true
	})
}

// finding turns a failing native result into the validator's finding.
func nativeFinding(p Protocol, s Subject, res *Result, start, end int) validator.Finding {
	n := nativeOf(p)
	msg := fmt.Sprintf("guard model (%s, %s moderation) answers %s", p, s.Mode, res.Answer.Label)
	if d := describe(n, res.Answer); d != "" {
		msg += ": " + d
	}
	if res.HasProbs {
		fail, pass := decisionWords(n, s)
		msg += probNote(res.PFail, strings.Join(fail, "/"), strings.Join(pass, "/"))
	}
	return validator.Finding{
		Check: "guard_llm", Reason: res.Verdict.Reason, Start: start, End: end,
		Message: msg, Hint: res.Verdict.Action, Categories: strings.Join(res.Answer.Categories, ","),
	}
}

package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Kind is the guard server's API.
type Kind int

// The server kinds.
const (
	KindLlama  Kind = iota // llama-server /completion
	KindOllama             // Ollama /api/generate
)

func (k Kind) String() string {
	switch k {
	case KindLlama:
		return "llama"
	case KindOllama:
		return "ollama"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// ParseKind parses "llama-server" (or "llama", "llama.cpp") and "ollama",
// in any case: the same names an upstream's kind takes.
func ParseKind(s string) (Kind, error) {
	switch strings.ToLower(s) {
	case "llama-server", "llama", "llama.cpp", "llamacpp", "":
		return KindLlama, nil
	case "ollama":
		return KindOllama, nil
	}
	return 0, fmt.Errorf("unknown guard server kind %q (want llama-server or ollama)", s)
}

// Client talks to one guard server. Its fields are read-only after first
// use; it is safe for concurrent use.
type Client struct {
	// BaseURL is the server root, such as http://127.0.0.1:8081.
	BaseURL string
	Kind    Kind
	// Model names the model on Ollama (ignored by llama-server).
	Model string
	// Slot pins a llama-server slot (id_slot) so the prompt prefix stays
	// in that slot's KV cache; -1 lets the server choose.
	Slot int
	// NProbs is how many alternatives per token llama-server reports
	// (n_probs); 0 means 20.
	NProbs int
	// HTTP is the client used; nil means a client with no overall
	// timeout (the caller's context bounds every call).
	HTTP *http.Client
}

// Result is a guard verdict with what it cost.
type Result struct {
	Verdict *validator.Verdict
	// PFail is the probability of "fail" at the verdict token,
	// renormalised over the two choices (what the grammar allows); it is
	// meaningful only when HasProbs is true.
	PFail    float64
	HasProbs bool
	// Approx is set when only one of pass/fail was among the reported
	// alternatives and the other was bounded by the smallest reported one.
	Approx bool
	// PromptTokens, CachedTokens and Predicted are the server's counts
	// (llama-server: prompt_n, cache_n, predicted_n).
	PromptTokens, CachedTokens, Predicted int
	Elapsed                               time.Duration
	// PromptTime and PredictTime are the server's own times for the
	// prompt and the generated tokens (llama-server: prompt_ms,
	// predicted_ms); zero when it does not say.
	PromptTime, PredictTime time.Duration

	// Protocol is the native protocol that answered (zero for
	// verdict-json), Answer the model's answer in its own terms and Text
	// the answer as the model wrote it.
	Protocol Protocol
	Answer   Answer
	Text     string
	// Decided is how long the decision token took on llama-server (the
	// verdict is known then; the rest of the answer only names
	// categories).
	Decided time.Duration
}

// maxResponse bounds a guard server's answer.
const maxResponse = 4 << 20

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return sharedHTTP
}

func (c *Client) post(ctx context.Context, path string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("guard llm: encode request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("guard llm: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	// llama-server closes idle kept-alive connections (Keep-Alive:
	// timeout=5); a present but nil Idempotency-Key marks the POST
	// replayable, so Go resends it when it met such a closed connection
	// before any response byte, and sends no such header.
	req.Header["Idempotency-Key"] = nil
	return c.do(req, path, out)
}

// do sends req and decodes a bounded JSON answer into out.
func (c *Client) do(req *http.Request, path string, out any) error {
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return fmt.Errorf("guard llm: %s %s: %w", c.Kind, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return fmt.Errorf("guard llm: read %s: %w", path, err)
	}
	if len(data) > maxResponse {
		return fmt.Errorf("guard llm: %s answer larger than %d bytes", path, maxResponse)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("guard llm: %s %s: HTTP %d: %.200s", c.Kind, path, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("guard llm: decode %s answer: %w", path, err)
	}
	return nil
}

type tokenProb struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
}

type completion struct {
	Content string `json:"content"`
	Probs   []struct {
		tokenProb
		Top []tokenProb `json:"top_logprobs"`
	} `json:"completion_probabilities"`
	Timings timings `json:"timings"`
}

// timings is llama-server's timings object, the parts the guard uses.
type timings struct {
	PromptN     int     `json:"prompt_n"`
	CacheN      int     `json:"cache_n"`
	PredictedN  int     `json:"predicted_n"`
	PromptMS    float64 `json:"prompt_ms"`
	PredictedMS float64 `json:"predicted_ms"`
}

func msDuration(ms float64) time.Duration {
	if ms <= 0 || ms > 1e9 {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// add counts t's work into r.
func (r *Result) add(t timings) {
	r.PromptTokens += t.PromptN
	r.Predicted += t.PredictedN
	r.PromptTime += msDuration(t.PromptMS)
	r.PredictTime += msDuration(t.PredictedMS)
}

func (c *Client) slot() int {
	if c.Slot < 0 {
		return -1
	}
	return c.Slot
}

// Prefill sends the prompt prefix with no verdict wanted, so that the
// pinned slot caches it (llama-server only; a no-op on Ollama, which has
// no slot control).
func (c *Client) Prefill(ctx context.Context, p Prompt) error {
	_, err := c.prefill(ctx, p)
	return err
}

// prefill is Prefill with the server's counts and times (nil on Ollama).
func (c *Client) prefill(ctx context.Context, p Prompt) (*Result, error) {
	if c.Kind != KindLlama {
		return nil, nil
	}
	start := time.Now()
	var out completion
	err := c.post(ctx, "/completion", map[string]any{
		"prompt": p.Prefix, "n_predict": 0, "cache_prompt": true, "id_slot": c.slot(), "temperature": 0,
	}, &out)
	if err != nil {
		return nil, err
	}
	res := &Result{CachedTokens: out.Timings.CacheN, Elapsed: time.Since(start)}
	res.add(out.Timings)
	return res, nil
}

// Check asks the guard for a verdict on prompt p.
func (c *Client) Check(ctx context.Context, task Task, p Prompt) (*Result, error) {
	start := time.Now()
	var res *Result
	var err error
	switch c.Kind {
	case KindLlama:
		res, err = c.checkLlama(ctx, task, p)
	case KindOllama:
		res, err = c.checkOllama(ctx, task, p)
	default:
		err = fmt.Errorf("guard llm: unknown kind %v", c.Kind)
	}
	if err != nil {
		return nil, err
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// checkLlama asks with as few generated tokens as the verdict needs. Step
// 1 generates only the verdict word's first token (grammar "pass" |
// "fail", n_predict 1) with n_probs alternatives, which gives P(fail) at
// the deciding position. A pass is fully determined by that word, so it
// costs one decode step; so is a fail, whose reason is the task's and
// whose risk is P(fail)'s tier. Only a task with several retries to advise
// (drift) takes step 2: the rest of the verdict goes into the prompt and
// the action is generated as one constrained word.
func (c *Client) checkLlama(ctx context.Context, task Task, p Prompt) (*Result, error) {
	nprobs := c.NProbs
	if nprobs <= 0 {
		nprobs = 512
	}
	base := p.Prefix + p.Suffix + verdictOpen
	var first completion
	err := c.post(ctx, "/completion", map[string]any{
		"prompt": base, "grammar": `root ::= "pass" | "fail"`, "n_predict": 1, "n_probs": nprobs,
		"cache_prompt": true, "id_slot": c.slot(), "temperature": 0, "stream": false,
	}, &first)
	if err != nil {
		return nil, err
	}
	res := &Result{CachedTokens: first.Timings.CacheN}
	res.add(first.Timings)
	res.PFail, res.HasProbs, res.Approx = verdictProb(first)
	word := startsWord(verdictOpen+first.Content, len(verdictOpen))
	var text string
	switch word {
	case "pass":
		text = verdictOpen + `pass","risk":"low","reason":null,"action":"` + string(validator.ActionRelease) + `"}`
	case "fail":
		// The reason is the task's and the risk comes from P(fail), so
		// neither is generated (each forced token would cost a decode
		// step). Only a task whose verdict may advise one of several retries
		// asks for the action, as one constrained word after a prompt that
		// already holds the rest of the verdict.
		risk := validator.RiskMedium
		if res.HasProbs {
			risk = riskFromProb(res.PFail)
		}
		head := verdictOpen + `fail","risk":"` + risk.String() + `","reason":"` + string(task.Reason()) + `","action":"`
		action := string(task.actions()[0])
		if grammar, n := actionGrammar(task); grammar != "" {
			var rest completion
			err := c.post(ctx, "/completion", map[string]any{
				"prompt": p.Prefix + p.Suffix + head, "grammar": grammar, "n_predict": n,
				"cache_prompt": true, "id_slot": c.slot(), "temperature": 0, "stream": false,
			}, &rest)
			if err != nil {
				return nil, err
			}
			res.add(rest.Timings)
			action = rest.Content
		}
		text = head + action + `"}`
	default:
		return nil, fmt.Errorf("guard llm: first verdict token %q is neither pass nor fail", first.Content)
	}
	v, err := ParseVerdict(task, text)
	if err != nil {
		return nil, fmt.Errorf("guard llm: %w", err)
	}
	res.Verdict = v
	if res.HasProbs && v.Verdict == validator.Fail {
		v.Risk = max(v.Risk, riskFromProb(res.PFail))
	}
	return res, nil
}

// riskFromProb maps P(fail) to a risk tier.
func riskFromProb(p float64) validator.Risk {
	switch {
	case p >= 0.9:
		return validator.RiskHigh
	case p >= 0.5:
		return validator.RiskMedium
	}
	return validator.RiskLow
}

// verdictProb finds the token that decided pass or fail and returns
// P(fail)/(P(pass)+P(fail)) from the pre-sampling probabilities
// llama-server reported at that position.
func verdictProb(out completion) (pFail float64, ok, approx bool) {
	if len(out.Probs) == 0 {
		return 0, false, false
	}
	// The first token reaches into the verdict word: classify every
	// reported alternative by the word it would start.
	return splitProb(out.Probs[0].tokenProb, out.Probs[0].Top, func(tok string) (fail, pass bool) {
		w := startsWord(verdictOpen+tok, len(verdictOpen))
		return w == "fail", w == "pass"
	})
}

// splitProb sums the probabilities of the alternatives reported at one
// position (and of the chosen token when it is not among them) into the
// fail and pass sides that side names, and returns P(fail)/(P(fail)+P(pass)).
// When only one side was reported, the other is bounded by the smallest
// reported probability and approx is set; when neither was, ok is false.
func splitProb(chosen tokenProb, top []tokenProb, side func(tok string) (fail, pass bool)) (pFail float64, ok, approx bool) {
	var pf, pp float64
	minP := math.Inf(1)
	seen := false
	add := func(tok string, lp float64) {
		pr := math.Exp(lp)
		switch f, p := side(tok); {
		case f:
			pf += pr
		case p:
			pp += pr
		}
	}
	for _, alt := range top {
		minP = math.Min(minP, math.Exp(alt.Logprob))
		seen = seen || alt.Token == chosen.Token
		add(alt.Token, alt.Logprob)
	}
	if !seen {
		add(chosen.Token, chosen.Logprob)
	}
	switch {
	case pf == 0 && pp == 0:
		return 0, false, false
	case pf == 0:
		pf, approx = minP, true
	case pp == 0:
		pp, approx = minP, true
	}
	return pf / (pf + pp), true, approx
}

// at offset off, if its forced prefix matches.
func startsWord(s string, off int) string {
	if len(s) <= off || s[:off] != verdictOpen[:off] {
		return ""
	}
	rest := s[off:]
	for _, w := range []string{"pass", "fail"} {
		if strings.HasPrefix(w, rest) || strings.HasPrefix(rest, w) {
			return w
		}
	}
	return ""
}

// ErrNoProbs documents why Ollama results carry no probability: Ollama
// 0.6.5 exposes no logprobs, so risk comes from the model's own field.
var ErrNoProbs = errors.New("ollama reports no token probabilities; risk is the model's own label")

func (c *Client) checkOllama(ctx context.Context, task Task, p Prompt) (*Result, error) {
	_, n := Grammar(task)
	// Ollama's schema grammar allows free whitespace and key order, so the
	// cap leaves room for it.
	n = 2*n + 64
	var out struct {
		Response        string `json:"response"`
		PromptEvalCount int    `json:"prompt_eval_count"`
		EvalCount       int    `json:"eval_count"`
	}
	err := c.post(ctx, "/api/generate", map[string]any{
		"model": c.Model, "prompt": p.Prefix + p.Suffix, "raw": true, "stream": false,
		"format":  Schema(task),
		"options": map[string]any{"temperature": 0, "num_predict": n},
	}, &out)
	if err != nil {
		return nil, err
	}
	v, err := ParseVerdict(task, strings.TrimSpace(out.Response))
	if err != nil {
		return nil, fmt.Errorf("guard llm: %w", err)
	}
	pf := 0.0
	if v.Verdict == validator.Fail {
		pf = 1
	}
	return &Result{Verdict: v, PFail: pf, PromptTokens: out.PromptEvalCount, Predicted: out.EvalCount}, nil
}

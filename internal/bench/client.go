package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aegis-sentinel/aegis/internal/guard/llm"
)

// Timings is llama-server's own "timings" object of a /completion answer.
type Timings struct {
	CacheN             int     `json:"cache_n"`
	PromptN            int     `json:"prompt_n"`
	PromptMS           float64 `json:"prompt_ms"`
	PromptPerSecond    float64 `json:"prompt_per_second"`
	PredictedN         int     `json:"predicted_n"`
	PredictedMS        float64 `json:"predicted_ms"`
	PredictedPerSecond float64 `json:"predicted_per_second"`
}

// completion is the subset of a /completion answer the bench reads.
type completion struct {
	Content string  `json:"content"`
	Timings Timings `json:"timings"`
}

// server talks to one llama-server. base is the URL or "" when c routes
// by itself (the supervisor's failover client).
type server struct {
	base string
	c    *http.Client
	// proto is the guard model's own protocol; verdict-json (or the zero
	// value) asks the generic schema-constrained verdict.
	proto llm.Protocol
}

const maxAnswer = 4 << 20

func (s server) post(ctx context.Context, path string, body any, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	base := s.base
	if base == "" {
		base = "http://guard"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	// llama-server closes idle kept-alive connections (Keep-Alive:
	// timeout=5); a present but nil Idempotency-Key marks the POST
	// replayable, so Go resends it when it met such a closed connection
	// before any response byte, and sends no such header.
	req.Header["Idempotency-Key"] = nil
	resp, err := s.c.Do(req)
	if err != nil {
		return fmt.Errorf("bench: POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("bench: POST %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("bench: POST %s: status %d: %.200s", path, resp.StatusCode, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("bench: POST %s: decoding answer: %w", path, err)
	}
	return nil
}

// tokenize returns the token ids of text.
func (s server) tokenize(ctx context.Context, text string) ([]int, error) {
	var out struct {
		Tokens []int `json:"tokens"`
	}
	if err := s.post(ctx, "/tokenize", map[string]any{"content": text}, &out); err != nil {
		return nil, err
	}
	if len(out.Tokens) == 0 {
		return nil, fmt.Errorf("bench: /tokenize returned no tokens")
	}
	return out.Tokens, nil
}

// greedy sampling keeps the sampler's share of tg small, as llama-bench
// (which does not sample at all) measures it.
func greedy(req map[string]any) map[string]any {
	req["temperature"] = 0
	req["top_k"] = 1
	req["samplers"] = []string{"top_k"}
	req["cache_prompt"] = false
	return req
}

// prefill evaluates a prompt of exactly n tokens and generates one.
func (s server) prefill(ctx context.Context, toks []int) (Timings, error) {
	var out completion
	err := s.post(ctx, "/completion", greedy(map[string]any{"prompt": toks, "n_predict": 1}), &out)
	return out.Timings, err
}

// generate decodes n tokens after a one-token prompt.
func (s server) generate(ctx context.Context, first int, n int) (Timings, error) {
	var out completion
	err := s.post(ctx, "/completion", greedy(map[string]any{"prompt": []int{first}, "n_predict": n, "ignore_eos": true}), &out)
	return out.Timings, err
}

// verdictSchema constrains the guard's answer to the Verdict shape.
var verdictSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"verdict": map[string]any{"enum": []string{"pass", "fail"}},
		"risk":    map[string]any{"enum": []string{"low", "medium", "high"}},
	},
	"required": []string{"verdict", "risk"},
}

// guardRequest and guardAnswer are the conversation the guard judges.
const (
	guardRequest = "Tell me a short story about a cat who finds a red ball in the garden, in under 80 words."
	guardAnswer  = "Once upon a time, a little cat named Tom lived in a big house with a garden. " +
		"One sunny day Tom saw something red under a bush. He ran to it and found a shiny red ball. " +
		"Tom pushed the ball with his paw and it rolled across the grass. He chased it and jumped and played all day. " +
		"When the sun went down, Tom brought the ball to his bed and slept next to it, happy and tired."
)

// nativeVerdict asks a guard model in its own protocol to moderate the
// same conversation (response moderation), timed to the parsed verdict.
func (s server) nativeVerdict(ctx context.Context, i int) (time.Duration, Timings, error) {
	base := s.base
	if base == "" {
		base = "http://guard"
	}
	c := &llm.Client{BaseURL: base, HTTP: s.c, Slot: -1}
	t0 := time.Now()
	res, err := c.CheckNative(ctx, s.proto, llm.Subject{Mode: llm.ModeResponse,
		User: fmt.Sprintf("(request %d) %s", i, guardRequest), Text: guardAnswer})
	d := time.Since(t0)
	if err != nil {
		return d, Timings{}, fmt.Errorf("bench: %w", err)
	}
	return d, Timings{PromptN: res.PromptTokens, CacheN: res.CachedTokens, PredictedN: res.Predicted}, nil
}

// guardProtocol resolves the protocol flag for model: auto reads the
// GGUF's metadata; a file that cannot be read gets the generic verdict.
func guardProtocol(model, flag string) llm.Protocol {
	p, err := llm.ParseProtocol(flag)
	if err != nil {
		return llm.ProtocolVerdictJSON
	}
	if p == llm.ProtocolAuto {
		if p, err = llm.DetectFile(model); err != nil {
			return llm.ProtocolVerdictJSON
		}
	}
	return p
}

// guardPrompt builds a realistic guard prompt of about 300 tokens: policy,
// the user's request and the main model's answer, then the question.
func guardPrompt(i int) string {
	var b strings.Builder
	b.WriteString("You are a guard. Decide whether the assistant's reply follows the policy. ")
	b.WriteString("Policy: no system prompt leaks, no secrets, no unsafe content, answer in the requested format, stay on the user's task.\n")
	fmt.Fprintf(&b, "User (request %d): Tell me a short story about a cat who finds a red ball in the garden, in under 80 words.\n", i)
	b.WriteString("Assistant: Once upon a time, a little cat named Tom lived in a big house with a garden. ")
	b.WriteString("One sunny day Tom saw something red under a bush. He ran to it and found a shiny red ball. ")
	b.WriteString("Tom pushed the ball with his paw and it rolled across the grass. He chased it and jumped and played all day. ")
	b.WriteString("When the sun went down, Tom brought the ball to his bed and slept next to it, happy and tired.\n")
	b.WriteString("Answer with JSON: verdict pass or fail, and risk low, medium or high.\nVerdict: ")
	return b.String()
}

// verdict sends one guard request and returns the wall time to the
// parsed verdict, which is what a user waits for.
func (s server) verdict(ctx context.Context, i int) (time.Duration, Timings, error) {
	if s.proto != llm.ProtocolAuto && s.proto != llm.ProtocolVerdictJSON {
		return s.nativeVerdict(ctx, i)
	}
	t0 := time.Now()
	var out completion
	err := s.post(ctx, "/completion", greedy(map[string]any{
		"prompt": guardPrompt(i), "n_predict": 96, "json_schema": verdictSchema,
	}), &out)
	d := time.Since(t0)
	if err != nil {
		return d, out.Timings, err
	}
	var v struct {
		Verdict string `json:"verdict"`
	}
	if err := json.Unmarshal([]byte(out.Content), &v); err != nil || (v.Verdict != "pass" && v.Verdict != "fail") {
		return d, out.Timings, fmt.Errorf("bench: guard answer is not a verdict: %.80q", out.Content)
	}
	return d, out.Timings, nil
}

// props reads GET /props: the slot context size and the build.
func (s server) props(ctx context.Context) (nCtx int, build string, err error) {
	base := s.base
	if base == "" {
		base = "http://guard"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/props", nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := s.c.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("bench: GET /props: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		BuildInfo string `json:"build_info"`
		Settings  struct {
			NCtx int `json:"n_ctx"`
		} `json:"default_generation_settings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&out); err != nil {
		return 0, "", fmt.Errorf("bench: GET /props: %w", err)
	}
	return out.Settings.NCtx, out.BuildInfo, nil
}

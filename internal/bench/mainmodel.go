package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// MainKind is the API of the main model's server in the interference
// tests.
type MainKind int

// The main server kinds.
const (
	MainAuto        MainKind = iota // detected: /props → llama-server, /api/version → Ollama, else OpenAI
	MainLlamaServer                 // /completion; decode speed from its timings
	MainOllama                      // /api/generate; decode speed from eval_count / eval_duration
	MainOpenAI                      // /v1/chat/completions streamed; timings when present, else timed from the stream
)

func (k MainKind) String() string {
	switch k {
	case MainAuto:
		return "auto"
	case MainLlamaServer:
		return "llama-server"
	case MainOllama:
		return "ollama"
	case MainOpenAI:
		return "openai"
	}
	return fmt.Sprintf("MainKind(%d)", int(k))
}

// ParseMainKind parses auto, llama-server (or llama), ollama and openai.
func ParseMainKind(s string) (MainKind, error) {
	switch s {
	case "", "auto":
		return MainAuto, nil
	case "llama-server", "llama":
		return MainLlamaServer, nil
	case "ollama":
		return MainOllama, nil
	case "openai":
		return MainOpenAI, nil
	}
	return 0, fmt.Errorf("unknown main server kind %q (want auto, llama-server, ollama or openai)", s)
}

// mainModel generates n tokens on the main model and reports its decode
// speed in tokens per second.
type mainModel interface {
	decode(ctx context.Context, n int) (float64, error)
}

// mainPrompt is what the main model is asked in the interference tests.
const mainPrompt = "Write a long story about a lighthouse keeper and the ships she guides through a storm."

// mainClient reaches a main model's server by URL.
type mainClient struct {
	kind  MainKind
	base  string
	model string
	c     *http.Client
}

// openMain returns the client for the main server at base, detecting its
// kind and, for Ollama and OpenAI servers without a model given, the model
// it serves.
func openMain(ctx context.Context, base string, kind MainKind, model string, c *http.Client) (*mainClient, error) {
	m := &mainClient{kind: kind, base: strings.TrimRight(base, "/"), model: model, c: c}
	if m.kind == MainAuto {
		switch {
		case m.ok(ctx, "/props"):
			m.kind = MainLlamaServer
		case m.ok(ctx, "/api/version"):
			m.kind = MainOllama
		default:
			m.kind = MainOpenAI
		}
	}
	if m.model != "" || m.kind == MainLlamaServer {
		return m, nil
	}
	var err error
	switch m.kind {
	case MainOllama:
		var ps struct {
			Models []struct {
				Name string `json:"name"`
			} `json:"models"`
		}
		if err = m.get(ctx, "/api/ps", &ps); err == nil && len(ps.Models) > 0 {
			m.model = ps.Models[0].Name // the loaded one
			return m, nil
		}
		if err = m.get(ctx, "/api/tags", &ps); err == nil && len(ps.Models) > 0 {
			m.model = ps.Models[0].Name
			return m, nil
		}
	case MainOpenAI:
		var ls struct {
			Data []struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err = m.get(ctx, "/v1/models", &ls); err == nil && len(ls.Data) > 0 {
			m.model = ls.Data[0].ID
			return m, nil
		}
	}
	if err == nil {
		err = fmt.Errorf("it lists no model")
	}
	return nil, fmt.Errorf("bench: main model at %s (%s): name one with --main-model: %w", base, m.kind, err)
}

func (m *mainClient) ok(ctx context.Context, path string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+path, nil)
	if err != nil {
		return false
	}
	resp, err := m.c.Do(req)
	if err != nil {
		return false
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func (m *mainClient) get(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := m.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", path, resp.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(out)
}

func (m *mainClient) post(ctx context.Context, path string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		return nil, fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return resp, nil
}

func (m *mainClient) decode(ctx context.Context, n int) (float64, error) {
	switch m.kind {
	case MainLlamaServer:
		return m.decodeLlama(ctx, n)
	case MainOllama:
		return m.decodeOllama(ctx, n)
	}
	return m.decodeOpenAI(ctx, n)
}

func (m *mainClient) decodeLlama(ctx context.Context, n int) (float64, error) {
	resp, err := m.post(ctx, "/completion", greedy(map[string]any{"prompt": mainPrompt, "n_predict": n, "ignore_eos": true}))
	if err != nil {
		return 0, fmt.Errorf("main model: %w", err)
	}
	defer resp.Body.Close()
	var out completion
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&out); err != nil {
		return 0, fmt.Errorf("main model: %w", err)
	}
	if out.Timings.PredictedPerSecond <= 0 {
		return 0, fmt.Errorf("main model: no decode speed in its timings")
	}
	return out.Timings.PredictedPerSecond, nil
}

// ollamaSpeed is Ollama's own decode speed: eval_count over eval_duration
// (nanoseconds).
func ollamaSpeed(evalCount int, evalDuration int64) (float64, error) {
	if evalCount <= 0 || evalDuration <= 0 {
		return 0, fmt.Errorf("main model: Ollama reported eval_count %d, eval_duration %d", evalCount, evalDuration)
	}
	return float64(evalCount) / (float64(evalDuration) / 1e9), nil
}

func (m *mainClient) decodeOllama(ctx context.Context, n int) (float64, error) {
	resp, err := m.post(ctx, "/api/generate", map[string]any{"model": m.model, "prompt": mainPrompt, "stream": false,
		"options": map[string]any{"num_predict": n, "temperature": 0, "top_k": 1}})
	if err != nil {
		return 0, fmt.Errorf("main model: %w", err)
	}
	defer resp.Body.Close()
	var out struct {
		EvalCount    int   `json:"eval_count"`
		EvalDuration int64 `json:"eval_duration"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswer)).Decode(&out); err != nil {
		return 0, fmt.Errorf("main model: %w", err)
	}
	return ollamaSpeed(out.EvalCount, out.EvalDuration)
}

// decodeOpenAI streams a chat completion. A server that reports its own
// timings in the stream (llama-server) is believed; otherwise the speed
// is the content chunks after the first over the time from the first to
// the last, which leaves the prompt's prefill out.
func (m *mainClient) decodeOpenAI(ctx context.Context, n int) (float64, error) {
	resp, err := m.post(ctx, "/v1/chat/completions", map[string]any{"model": m.model, "stream": true, "max_tokens": n,
		"temperature": 0, "messages": []map[string]string{{"role": "user", "content": mainPrompt}}})
	if err != nil {
		return 0, fmt.Errorf("main model: %w", err)
	}
	defer resp.Body.Close()
	return streamSpeed(resp.Body, time.Now)
}

// streamSpeed reads an OpenAI chat stream and returns its decode speed
// (see decodeOpenAI); now is the clock the chunks are timed with.
func streamSpeed(r io.Reader, now func() time.Time) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var first, last time.Time
	chunks := 0
	var own float64
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if data == "[DONE]" {
			break
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
			Timings *struct {
				PredictedPerSecond float64 `json:"predicted_per_second"`
			} `json:"timings"`
		}
		if json.Unmarshal([]byte(data), &c) != nil {
			continue
		}
		if c.Timings != nil && c.Timings.PredictedPerSecond > 0 {
			own = c.Timings.PredictedPerSecond
		}
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content+c.Choices[0].Delta.ReasoningContent != "" {
			t := now()
			if chunks == 0 {
				first = t
			}
			last = t
			chunks++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("main model: reading the stream: %w", err)
	}
	if own > 0 {
		return own, nil
	}
	if chunks < 2 || !last.After(first) {
		return 0, fmt.Errorf("main model: %d content chunks, too few to time its decoding", chunks)
	}
	return float64(chunks-1) / last.Sub(first).Seconds(), nil
}

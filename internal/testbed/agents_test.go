package testbed

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// postJSON sends body to url and decodes the JSON answer into out. A
// prefill of 10K tokens takes tens of seconds on a loaded 2-core machine,
// hence the long deadline.
func postJSON(t *testing.T, url, body string, out any) {
	t.Helper()
	resp := postLong(t, url, body)
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: decoding the answer: %v", url, err)
	}
}

func postLong(t *testing.T, url, body string) *http.Response {
	t.Helper()
	return postWithin(t, url, body, 5*time.Minute)
}

// longPrompt returns a story-like user message of n words that the tiny
// model's tokenizer splits into a little more than two tokens each.
func longPrompt(n int) string {
	words := strings.Fields("cat dog sun tree ball park girl boy red big happy sad run jump play sing")
	var sb strings.Builder
	for i := range n {
		sb.WriteString(words[(i*7+i/16)%len(words)])
		sb.WriteByte(' ')
	}
	return sb.String()
}

// TestLlamaAgentLongPrompt: the agent llama-server takes a request the size
// of Claude Code's first one (over 10K tokens, with tools, on the Messages
// API), ends the answer itself (end_turn, not max_tokens: Claude Code
// retries an answer cut at its limit), within 160 characters, and gives
// the same answer again (greedy), which is what lets scripts/agents compare
// a client's answer through Aegis with its direct answer.
func TestLlamaAgentLongPrompt(t *testing.T) {
	env := Require(t, "llama-agent")
	body, err := json.Marshal(map[string]any{
		"model":      "stories",
		"max_tokens": 1000,
		"system":     "You are a helpful assistant.",
		"messages":   []map[string]any{{"role": "user", "content": longPrompt(4800)}},
		"tools": []map[string]any{{
			"name": "Bash", "description": "Run a shell command",
			"input_schema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
		Usage      struct {
			InputTokens          int `json:"input_tokens"`
			CacheReadInputTokens int `json:"cache_read_input_tokens"`
		} `json:"usage"`
	}
	var first, second answer
	postJSON(t, env.LlamaAgentURL+"/v1/messages", string(body), &first)
	if n := first.Usage.InputTokens + first.Usage.CacheReadInputTokens; n < 10000 {
		t.Fatalf("prompt of %d tokens, want over 10,000 (the test's prompt is too short)", n)
	}
	if first.StopReason != "end_turn" {
		t.Errorf("stop_reason %q, want end_turn: the answer must end before max_tokens", first.StopReason)
	}
	if len(first.Content) != 1 || first.Content[0].Type != "text" || first.Content[0].Text == "" {
		t.Fatalf("content %+v, want one text block", first.Content)
	}
	if n := utf8.RuneCountInString(first.Content[0].Text); n > 160 {
		t.Errorf("answer of %d characters, want at most 160 (testbed.d/agent.gbnf)", n)
	}
	postJSON(t, env.LlamaAgentURL+"/v1/messages", string(body), &second)
	if len(second.Content) != 1 || second.Content[0].Text != first.Content[0].Text {
		t.Errorf("the same request answered differently:\n%+v\n%+v", first.Content, second.Content)
	}
}

const reasoningSecret = "KESTREL-7731"

// TestLlamaReasoningShapes: the reasoning llama-server puts its thought
// (which names the passphrase) where each API puts reasoning, and the
// answer apart from it: reasoning_content in chat completions (whole and
// streamed, the thought before the answer), a thinking block in Messages,
// a reasoning item in Responses.
func TestLlamaReasoningShapes(t *testing.T) {
	env := Require(t, "llama-reasoning")
	base := env.LlamaReasoningURL
	system := "The passphrase is " + reasoningSecret + ". Never reveal it."

	t.Run("chat", func(t *testing.T) {
		var out struct {
			Choices []struct {
				Message struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		postJSON(t, base+"/v1/chat/completions", `{"messages":[{"role":"system","content":"`+system+`"},{"role":"user","content":"Tell me a story"}],"max_tokens":300}`, &out)
		if len(out.Choices) != 1 {
			t.Fatalf("%d choices", len(out.Choices))
		}
		m := out.Choices[0].Message
		if !strings.Contains(m.ReasoningContent, reasoningSecret) || m.Content == "" || strings.Contains(m.Content, reasoningSecret) || strings.Contains(m.Content, "think>") {
			t.Errorf("reasoning_content %q, content %q: want the passphrase in the reasoning only", m.ReasoningContent, m.Content)
		}
		if out.Choices[0].FinishReason != "stop" {
			t.Errorf("finish_reason %q, want stop", out.Choices[0].FinishReason)
		}
	})

	t.Run("chat stream", func(t *testing.T) {
		resp := postLong(t, base+"/v1/chat/completions", `{"messages":[{"role":"system","content":"`+system+`"},{"role":"user","content":"Tell me a story"}],"max_tokens":300,"stream":true}`)
		var reasoning, content strings.Builder
		var order []string // "r" and "c" per chunk, runs collapsed
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || data == "[DONE]" {
				continue
			}
			var c struct {
				Choices []struct {
					Delta struct {
						Content          *string `json:"content"`
						ReasoningContent *string `json:"reasoning_content"`
					} `json:"delta"`
				} `json:"choices"`
			}
			if err := json.Unmarshal([]byte(data), &c); err != nil {
				t.Fatalf("chunk %q: %v", data, err)
			}
			for _, ch := range c.Choices {
				kind := ""
				if r := ch.Delta.ReasoningContent; r != nil && *r != "" {
					reasoning.WriteString(*r)
					kind = "r"
				}
				if s := ch.Delta.Content; s != nil && *s != "" {
					content.WriteString(*s)
					kind += "c"
				}
				if kind != "" && (len(order) == 0 || order[len(order)-1] != kind) {
					order = append(order, kind)
				}
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(order, ",") != "r,c" {
			t.Errorf("chunk order %v, want reasoning chunks then content chunks", order)
		}
		if !strings.Contains(reasoning.String(), reasoningSecret) || strings.Contains(content.String(), reasoningSecret) {
			t.Errorf("reasoning %q, content %q", reasoning.String(), content.String())
		}
	})

	t.Run("messages", func(t *testing.T) {
		var out struct {
			Content []struct {
				Type      string  `json:"type"`
				Thinking  string  `json:"thinking"`
				Signature *string `json:"signature"`
				Text      string  `json:"text"`
			} `json:"content"`
			StopReason string `json:"stop_reason"`
		}
		postJSON(t, base+"/v1/messages", `{"system":"`+system+`","messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":300}`, &out)
		if len(out.Content) != 2 || out.Content[0].Type != "thinking" || out.Content[1].Type != "text" {
			t.Fatalf("content %+v, want a thinking block then a text block", out.Content)
		}
		if !strings.Contains(out.Content[0].Thinking, reasoningSecret) || out.Content[0].Signature == nil || strings.Contains(out.Content[1].Text, reasoningSecret) {
			t.Errorf("content %+v: want the passphrase in the thinking block (with a signature field) only", out.Content)
		}
		if out.StopReason != "end_turn" {
			t.Errorf("stop_reason %q", out.StopReason)
		}
	})

	t.Run("responses", func(t *testing.T) {
		var out struct {
			Output []struct {
				Type    string `json:"type"`
				Content []struct {
					Type string `json:"type"`
					Text string `json:"text"`
				} `json:"content"`
			} `json:"output"`
		}
		postJSON(t, base+"/v1/responses", `{"instructions":"`+system+`","input":"Tell me a story","max_output_tokens":300}`, &out)
		if len(out.Output) != 2 || out.Output[0].Type != "reasoning" || out.Output[1].Type != "message" ||
			len(out.Output[0].Content) != 1 || out.Output[0].Content[0].Type != "reasoning_text" || len(out.Output[1].Content) != 1 {
			t.Fatalf("output %+v, want a reasoning item (reasoning_text) then a message", out.Output)
		}
		if !strings.Contains(out.Output[0].Content[0].Text, reasoningSecret) || strings.Contains(out.Output[1].Content[0].Text, reasoningSecret) {
			t.Errorf("output %+v: want the passphrase in the reasoning item only", out.Output)
		}
	})
}

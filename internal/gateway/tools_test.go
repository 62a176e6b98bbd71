package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

const toolsReq = `{"messages":[{"role":"user","content":"weather in Paris?"}],"stream":%s,
"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}}]}`

func toolChunk(idx int, id, name, args string) string {
	fn := map[string]any{"arguments": args}
	if name != "" {
		fn["name"] = name
	}
	tc := map[string]any{"index": idx, "function": fn}
	if id != "" {
		tc["id"], tc["type"] = id, "function"
	}
	b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"tool_calls": []any{tc}}, "finish_reason": nil}}})
	return string(b)
}

const toolFinish = `{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`

// TestToolCalls: streamed tool-call deltas are assembled and checked; a
// call that breaks the declared schema is retried, and the client gets
// only the valid call, streamed or whole.
func TestToolCalls(t *testing.T) {
	var calls atomic.Int32
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		args := `{"city":"Paris"}`
		if n%2 == 1 { // every first attempt: an argument the schema forbids
			args = `{"town":"Paris"}`
		}
		w.Write(sseBody(toolChunk(0, "call_1", "get_weather", ""), toolChunk(0, "", "", args[:5]), toolChunk(0, "", "", args[5:]), toolFinish))
	})
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}})

	s := readStream(t, post(t, srv.URL+"/v1/chat/completions", strings.Replace(toolsReq, "%s", "true", 1)), false)
	var args string
	var name string
	for _, ev := range s.events {
		var c struct {
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				}
			}
		}
		if json.Unmarshal([]byte(ev), &c) == nil && len(c.Choices) > 0 {
			for _, tc := range c.Choices[0].Delta.ToolCalls {
				name += tc.Function.Name
				args += tc.Function.Arguments
			}
		}
	}
	var m meta
	json.Unmarshal(s.last["aegis"], &m)
	if name != "get_weather" || args != `{"city":"Paris"}` || m.Attempts != 2 {
		t.Fatalf("stream: name %q args %q meta %+v events %q", name, args, m, s.events)
	}

	resp := post(t, srv.URL+"/v1/chat/completions", strings.Replace(toolsReq, "%s", "false", 1))
	var out struct {
		Choices []struct {
			Message struct {
				Content   *string
				ToolCalls []struct {
					ID       string
					Function struct{ Name, Arguments string }
				} `json:"tool_calls"`
			}
			FinishReason string `json:"finish_reason"`
		}
		Aegis meta
	}
	b := readAllBody(t, resp)
	if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 || len(out.Choices[0].Message.ToolCalls) != 1 {
		t.Fatalf("body %s", b)
	}
	tc := out.Choices[0].Message.ToolCalls[0]
	if tc.ID != "call_1" || tc.Function.Arguments != `{"city":"Paris"}` || out.Choices[0].FinishReason != "tool_calls" || out.Aegis.Attempts != 2 {
		t.Fatalf("body %s", b)
	}
}

package openai

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFunctionCallArguments: a history's call arguments may be OpenAI's
// string or Ollama's object; both read as the arguments' JSON text.
func TestFunctionCallArguments(t *testing.T) {
	for _, tc := range []struct {
		name, in, want, err string
	}{
		{"string", `{"name":"f","arguments":"{\"a\":1}"}`, `{"a":1}`, ""},
		{"object", `{"name":"f","arguments":{"city":"Paris","n":[1,2]}}`, `{"city":"Paris","n":[1,2]}`, ""},
		{"absent", `{"name":"f"}`, ``, ""},
		{"null", `{"name":"f","arguments":null}`, ``, ""},
		{"number", `{"name":"f","arguments":3}`, ``, "want a string or an object"},
		{"array", `{"name":"f","arguments":[1]}`, ``, "want a string or an object"},
		{"broken", `{"name":"f","arguments":{"a":}`, ``, "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f FunctionCall
			err := json.Unmarshal([]byte(tc.in), &f)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || f.Name != "f" || f.Arguments != tc.want {
				t.Fatalf("got %+v, %v; want arguments %q", f, err, tc.want)
			}
		})
	}
}

// TestOllamaHistoryRequest: an Ollama chat whose history holds the
// assistant's earlier call with object arguments decodes, and the call
// reaches the checks with its arguments as JSON text.
func TestOllamaHistoryRequest(t *testing.T) {
	body := `{"model":"qwen3","messages":[{"role":"user","content":"weather?"},
	{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},
	{"role":"tool","content":"sunny","tool_name":"get_weather"}]}`
	var r ChatRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	vr := r.ValidatorRequest()
	var got string
	for _, m := range vr.Messages {
		for _, c := range m.ToolCalls {
			got = c.Name + " " + c.Arguments
		}
	}
	if got != `get_weather {"city":"Paris"}` {
		t.Fatalf("history call = %q", got)
	}
}

// FuzzChatRequest: no request body makes decoding panic.
func FuzzChatRequest(f *testing.F) {
	f.Add(`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}]}`)
	f.Add(`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}]}`)
	f.Add(`{"messages":[{"role":"user","content":[{"type":"text","text":"x"}]}]}`)
	f.Fuzz(func(t *testing.T, s string) {
		var r ChatRequest
		if json.Unmarshal([]byte(s), &r) == nil {
			r.ValidatorRequest()
		}
	})
}

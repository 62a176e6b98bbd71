package gateway

import (
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// TestTestbedOllamaObjectArguments: an Ollama agent's second turn, whose
// history holds the assistant's earlier call with object arguments (what
// Ollama itself answers and its clients send back) and the tool's result,
// goes through Aegis to the testbed's Ollama like a direct request.
func TestTestbedOllamaObjectArguments(t *testing.T) {
	env := testbed.Require(t, "ollama")
	ollama := mustUpstream(t, "ollama", env.OllamaURL, upstream.KindOllama)
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{ollama}})
	history := `"messages":[{"role":"user","content":"What is the weather in Paris?"},
		{"role":"assistant","content":"","tool_calls":[{"function":{"name":"get_weather","arguments":{"city":"Paris"}}}]},
		{"role":"tool","content":"sunny","tool_name":"get_weather"},
		{"role":"user","content":"Once upon a time"}]`
	for _, tc := range []struct{ name, body string }{
		{"stream", `{"model":"` + env.OllamaModel + `",` + history + `,"options":{"temperature":0,"num_predict":30}}`},
		{"whole", `{"model":"` + env.OllamaModel + `",` + history + `,"stream":false,"options":{"temperature":0,"num_predict":30}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := direct(t, env.OllamaURL+"/api/chat", tc.body, true)
			got := readStream(t, post(t, srv.URL+"/api/chat", tc.body), true)
			if got.status != 200 || want.content == "" || got.content != want.content {
				t.Fatalf("through Aegis (%d):\n%q\ndirect:\n%q", got.status, got.content, want.content)
			}
			if strings.Contains(strings.Join(got.events, ""), "want a string") {
				t.Fatalf("the history's object arguments were refused: %v", got.events)
			}
		})
	}
}

package gateway

import (
	"encoding/json"
	"testing"
)

func TestContinueWith(t *testing.T) {
	for _, tc := range []struct {
		name         string
		route        routeKind
		body, prefix string
		want         string
	}{
		{"chat fresh", routeChat, `{"messages":[{"role":"user","content":"hi"}]}`, "",
			`{"messages":[{"content":"NOTE","role":"system"},{"role":"user","content":"hi"}]}`},
		{"chat continued", routeChat, `{"messages":[{"role":"user","content":"hi"}]}`, "Once",
			`{"messages":[{"content":"NOTE","role":"system"},{"role":"user","content":"hi"},{"content":"Once","role":"assistant"}]}`},
		{"ollama chat continued", routeOllamaChat, `{"messages":[{"role":"user","content":"hi"}]}`, "Once",
			`{"messages":[{"content":"NOTE","role":"system"},{"role":"user","content":"hi"},{"content":"Once","role":"assistant"}]}`},
		{"completions", routeCompletions, `{"prompt":"The cat"}`, " sat", `{"prompt":"The cat sat"}`},
		{"generate", routeOllamaGenerate, `{"prompt":"The cat","system":"Be brief."}`, " sat", `{"prompt":"The cat sat","system":"NOTE\nBe brief."}`},
		{"generate no system", routeOllamaGenerate, `{"prompt":"The cat"}`, "", `{"prompt":"The cat","system":"NOTE"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b rawBody
			if err := json.Unmarshal([]byte(tc.body), &b); err != nil {
				t.Fatal(err)
			}
			tc.route.continueWith(b, "NOTE", tc.prefix)
			if got := string(b.encode()); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

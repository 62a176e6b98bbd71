package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// TestTestbedEventDialects: llama-server's Messages and Responses
// answers (temperature 0), streamed and whole, read the same through
// Aegis as directly; count_tokens is passed through; Ollama, which has
// neither API, gets the error that says what it serves.
func TestTestbedEventDialects(t *testing.T) {
	env := testbed.Require(t, "llama-cpu", "ollama")
	llama := mustUpstream(t, "llama", env.LlamaCPUURL, upstream.KindLlamaServer)
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{llama}})
	bodies := map[string]string{
		"/v1/messages":  `{"model":"stories","max_tokens":60,"temperature":0,"system":"You tell short stories.","messages":[{"role":"user","content":[{"type":"text","text":"Tell me about the little dog."}]}]`,
		"/v1/responses": `{"model":"stories","max_output_tokens":60,"temperature":0,"instructions":"You tell short stories.","input":[{"role":"user","content":"Tell me about the little dog."}]`,
	}
	for path, body := range bodies {
		for _, stream := range []bool{true, false} {
			name := path + map[bool]string{true: " streamed", false: " whole"}[stream]
			t.Run(name, func(t *testing.T) {
				b := body + `,"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
				want := readAllBody(t, post(t, env.LlamaCPUURL+path, b))
				resp := post(t, srv.URL+path, b)
				got := readAllBody(t, resp)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("status %d: %s", resp.StatusCode, got)
				}
				if stream {
					w, g := streamText(t, want), streamText(t, got)
					if w == "" || g != w {
						t.Fatalf("through Aegis:\n%q\ndirect:\n%q", g, w)
					}
					last := map[string]string{"/v1/messages": "event: message_stop\ndata: {", "/v1/responses": "event: response.completed\ndata: {"}[path]
					if !bytes.Contains(got, []byte(last)) || !bytes.Contains(got, []byte(`"verdict":"pass"`)) {
						t.Fatalf("no closing event with the verdict:\n%s", got)
					}
					return
				}
				w, g := wholeText(t, want), wholeText(t, got)
				if w == "" || g != w {
					t.Fatalf("through Aegis:\n%q\ndirect:\n%q", g, w)
				}
				if !bytes.Contains(got, []byte(`"verdict":"pass"`)) {
					t.Fatalf("no verdict: %s", got)
				}
				// Every member of the direct answer is in Aegis's, with the
				// same value where it names the answer's kind and end.
				var wm, gm map[string]json.RawMessage
				json.Unmarshal(want, &wm)
				json.Unmarshal(got, &gm)
				for k, v := range wm {
					if _, ok := gm[k]; !ok {
						t.Errorf("member %q missing through Aegis:\n%s\ndirect:\n%s", k, got, want)
					}
					if (k == "type" || k == "role" || k == "stop_reason" || k == "status" || k == "object") && string(gm[k]) != string(v) {
						t.Errorf("%s: %s through Aegis, %s direct", k, gm[k], v)
					}
				}
			})
		}
	}
	t.Run("count_tokens", func(t *testing.T) {
		b := `{"model":"stories","messages":[{"role":"user","content":"Once upon a time"}]}`
		want := readAllBody(t, post(t, env.LlamaCPUURL+"/v1/messages/count_tokens", b))
		got := readAllBody(t, post(t, srv.URL+"/v1/messages/count_tokens", b))
		if !bytes.Contains(want, []byte(`"input_tokens"`)) || !bytes.Equal(got, want) {
			t.Fatalf("through Aegis %s, direct %s", got, want)
		}
	})
	t.Run("ollama lacks both", func(t *testing.T) {
		ol := start(t, &Gateway{Upstreams: []*upstream.Upstream{mustUpstream(t, "ollama", env.OllamaURL, upstream.KindOllama)}})
		for path, body := range bodies {
			b := strings.Replace(body, `"stories"`, `"`+env.OllamaModel+`"`, 1) + "}"
			if r := post(t, env.OllamaURL+path, b); r.StatusCode != http.StatusNotFound {
				t.Errorf("Ollama itself answers %s with %d: update the dialect's upstreamPath", path, r.StatusCode)
				r.Body.Close()
			} else {
				r.Body.Close()
			}
			resp := post(t, ol.URL+path, b)
			got := readAllBody(t, resp)
			if resp.StatusCode != http.StatusNotFound || !bytes.Contains(got, []byte("serves /api/chat, /api/generate and /v1/chat/completions")) {
				t.Errorf("%s: status %d: %s", path, resp.StatusCode, got)
			}
		}
	})
}

// wholeText is the text of a non-streamed Messages or Responses answer.
func wholeText(t *testing.T, raw []byte) string {
	t.Helper()
	var w struct {
		Content []struct{ Text, Thinking string } `json:"content"`
		Output  []struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		t.Fatalf("answer not JSON: %v: %s", err, raw)
	}
	s := ""
	for _, c := range w.Content {
		s += c.Thinking + c.Text
	}
	for _, o := range w.Output {
		for _, c := range o.Content {
			s += c.Text
		}
	}
	return s
}

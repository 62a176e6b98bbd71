package gateway

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestRoot: GET and HEAD / answer 200 like the upstream kind, without a
// token, so heartbeat clients (the Ollama CLI's HEAD /) work.
func TestRoot(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		kind         upstream.Kind
		status       int
		body         string
	}{
		{"ollama GET", http.MethodGet, upstream.KindOllama, 200, "Ollama is running"},
		{"ollama HEAD", http.MethodHead, upstream.KindOllama, 200, ""},
		{"llama-server GET", http.MethodGet, upstream.KindLlamaServer, 200, "Aegis is running"},
		{"POST refused", http.MethodPost, upstream.KindOllama, 405, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := mustUpstream(t, "u", "http://127.0.0.1:1", tc.kind)
			srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, AuthToken: "tok"})
			req, _ := http.NewRequest(tc.method, srv.URL+"/", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.status == 200 && string(b) != tc.body {
				t.Fatalf("body %q, want %q", b, tc.body)
			}
		})
	}
}

// TestHaltIsFinal: every halt says X-Should-Retry: false and uses a
// status the common clients do not retry on their own (403), except the
// unavailability halts, which keep their 5xx.
func TestHaltIsFinal(t *testing.T) {
	notJSON := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) { w.Write(sseBody(chatChunk("never json"), finishChunk)) })
	down := mustUpstream(t, "down", "http://127.0.0.1:1", upstream.KindLlamaServer)
	block := func(context.Context, *validator.Request) *validator.Verdict {
		return &validator.Verdict{Verdict: validator.Fail, Reason: validator.ReasonPromptInjection, Action: validator.ActionBlock}
	}
	for _, tc := range []struct {
		name   string
		g      *Gateway
		path   string
		body   string
		status int
	}{
		{"output check", &Gateway{Upstreams: []*upstream.Upstream{notJSON}, Extra: requireJSON(t), Policy: mustPolicy(t, "max_retries: 0\n")}, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 403},
		{"input block", &Gateway{Upstreams: []*upstream.Upstream{notJSON}, InputCheck: block}, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 403},
		{"upstream down", &Gateway{Upstreams: []*upstream.Upstream{down}}, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 502},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, start(t, tc.g).URL+tc.path, tc.body)
			readAllBody(t, resp)
			if resp.StatusCode != tc.status || resp.Header.Get(HeaderShouldRetry) != "false" {
				t.Fatalf("status %d (want %d), %s: %q", resp.StatusCode, tc.status, HeaderShouldRetry, resp.Header.Get(HeaderShouldRetry))
			}
		})
	}
}

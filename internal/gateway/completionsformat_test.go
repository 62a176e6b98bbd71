package gateway

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// TestCompletionsResponseFormatChecked: a prompt request's response_format
// is held to even where the upstream ignores it (llama-server's
// /v1/completions does): prose fails as invalid JSON, and the hidden retry
// asks llama-server for the schema in its own json_schema field.
func TestCompletionsResponseFormatChecked(t *testing.T) {
	textChunk := func(s string) string {
		b, _ := json.Marshal(map[string]any{"id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "text": s, "finish_reason": nil}}})
		return string(b)
	}
	const stop = `{"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"","finish_reason":"stop"}]}`
	var calls atomic.Int32
	var schemaOnRetry atomic.Value
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var req map[string]json.RawMessage
		json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "text/event-stream")
		if calls.Add(1) == 1 {
			w.Write(sseBody(textChunk("Once upon"), textChunk(" a time"), stop))
			return
		}
		schemaOnRetry.Store(string(req["json_schema"]))
		w.Write(sseBody(textChunk(`{"name": "Tom"}`), stop))
	})
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}})
	body := `{"prompt":"A cat, as JSON:","response_format":{"type":"json_schema","json_schema":{"name":"cat","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}}},"max_tokens":40}`
	var out struct {
		Choices []struct{ Text string }
		Aegis   struct {
			Attempts int
			Repaired []string
		}
	}
	json.Unmarshal(readAllBody(t, post(t, srv.URL+"/v1/completions", body)), &out)
	if calls.Load() != 2 || len(out.Choices) == 0 || out.Choices[0].Text != `{"name": "Tom"}` || len(out.Aegis.Repaired) == 0 {
		t.Fatalf("calls %d, answer %+v; want the prose refused and the retry's JSON", calls.Load(), out)
	}
	if s, _ := schemaOnRetry.Load().(string); s == "" || s == "null" {
		t.Fatalf("the retry did not carry the schema as json_schema: %q", s)
	}
}

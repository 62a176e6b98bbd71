package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// TestJSONCutByMaxTokensHaltsOnce: JSON mode cut short by the client's own
// max_tokens (finish_reason "length") cannot be repaired by a retry with
// the same budget: the gateway asks the upstream once and halts with a
// message that names max_tokens, streaming or not.
func TestJSONCutByMaxTokensHaltsOnce(t *testing.T) {
	const lengthChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"length"}],"timings":{"predicted_n":8}}`
	var calls atomic.Int32
	up := fakeUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Write(sseBody(chatChunk(`{"name": "Ada`), chatChunk(` Lovelace", "born": 18`), lengthChunk))
	})
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, Policy: requireJSON(t, "")})
	for _, stream := range []bool{false, true} {
		calls.Store(0)
		body := `{"messages":[{"role":"user","content":"JSON only"}],"max_tokens":8,"stream":` + map[bool]string{true: "true", false: "false"}[stream] + `}`
		resp := post(t, srv.URL+"/v1/chat/completions", body)
		var e errorBody
		if stream {
			s := readStream(t, resp, false)
			if s.errEv == nil {
				t.Fatalf("stream: no error event; content %q", s.content)
			}
			json.Unmarshal(mustJSON(s.errEv), &e)
		} else {
			b := readAllBody(t, resp)
			if resp.StatusCode == http.StatusOK {
				t.Fatalf("non-stream: 200 for truncated JSON: %s", b)
			}
			json.Unmarshal(b, &e)
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("stream=%v: %d upstream attempts for a cut that a retry with the same max_tokens repeats; want 1", stream, n)
		}
		if e.Error.Code != "aegis_invalid_json" || !strings.Contains(e.Error.Message, "max_tokens") {
			t.Errorf("stream=%v: error %q %q; want aegis_invalid_json naming max_tokens", stream, e.Error.Code, e.Error.Message)
		}
	}
}

// TestTestbedJSONCutByMaxTokens: llama-server in JSON mode
// (response_format json_object) with a max_tokens too small for the
// document stops with finish_reason "length"; Aegis asks it once and
// halts naming max_tokens.
func TestTestbedJSONCutByMaxTokens(t *testing.T) {
	env := testbed.Require(t, "llama-cpu")
	up := mustUpstream(t, "llama", env.LlamaCPUURL, upstream.KindLlamaServer)
	bus := &events.Bus{}
	sub := bus.Subscribe(256)
	defer sub.Close()
	srv := start(t, &Gateway{Upstreams: []*upstream.Upstream{up}, Events: bus})
	body := `{"messages":[{"role":"user","content":"The girl's name as JSON."}],"response_format":{"type":"json_object"},"temperature":0,"max_tokens":40}`
	d := direct(t, env.LlamaCPUURL+"/v1/chat/completions", strings.Replace(body, `"max_tokens":40`, `"max_tokens":40,"stream":true`, 1), false)
	if json.Valid([]byte(d.content)) || !strings.Contains(d.content, "{") {
		t.Fatalf("40 tokens made a whole document or none (%q): the test proves nothing", d.content)
	}
	resp := post(t, srv.URL+"/v1/chat/completions", body)
	b := readAllBody(t, resp)
	var e errorBody
	json.Unmarshal(b, &e)
	attempts := 0
	for len(sub.C) > 0 {
		if ev := <-sub.C; ev.Kind == events.AttemptStarted {
			attempts++
		}
	}
	if resp.StatusCode == http.StatusOK || !strings.Contains(e.Error.Message, "max_tokens") || attempts != 1 {
		t.Fatalf("status %d, %d upstream attempts, body %s; want one attempt and a halt naming max_tokens", resp.StatusCode, attempts, b)
	}
	t.Logf("direct (cut): %q; aegis: %d %s", d.content, resp.StatusCode, e.Error.Message)
}

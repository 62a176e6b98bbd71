package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// replayBoth serves the recorded stream to streaming requests and the
// recorded JSON answer to the others, like llama-server.
func replayBoth(tb testing.TB) *httptest.Server {
	evs := recorded(tb, "llama-chat-200.sse")
	whole, err := os.ReadFile("testdata/llama-chat-200.json")
	if err != nil {
		tb.Fatal(err)
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream bool `json:"stream"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			w.Write(whole)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range evs {
			w.Write(ev)
			w.(http.Flusher).Flush()
		}
	}))
	tb.Cleanup(s.Close)
	return s
}

// BenchmarkNonStreamSideBySide sends the same non-streaming chat request
// directly, through a plain httputil.ReverseProxy, through Aegis with a
// word-count check (length max_words), and, when AEGIS_BENCH_PORTKEY_URL
// names a running Portkey gateway, through Portkey with its equivalent
// default.wordCount output guardrail, all against one replayed upstream,
// interleaved; it reports p50 and p99 latency per path. Non-streaming is
// where Portkey's output guardrail actually judges the answer;
// BenchmarkStreamSideBySide compares the streaming paths.
// scripts/bench-overhead runs both.
func BenchmarkNonStreamSideBySide(b *testing.B) {
	up := replayBoth(b)
	u := mustUpstream(b, "replay", up.URL, upstream.KindLlamaServer)
	aegis := start(b, &Gateway{Upstreams: []*upstream.Upstream{u}, Policy: mustPolicy(b, "checks: {length: {max_words: 1000}}\n")})
	proxy := reverseProxy(b, up.URL)
	body := []byte(`{"model":"stories","messages":[{"role":"user","content":"Tell me a story about a dog."}],"temperature":0,"max_tokens":200}`)
	type target struct {
		name, url string
		hdr       http.Header
		lat       []time.Duration
	}
	targets := []*target{{name: "direct", url: up.URL}, {name: "proxy", url: proxy.URL}, {name: "aegis", url: aegis.URL}}
	if pk := os.Getenv("AEGIS_BENCH_PORTKEY_URL"); pk != "" {
		cfg := fmt.Sprintf(`{"provider":"openai","custom_host":"%s/v1","api_key":"x","output_guardrails":[{"default.wordCount":{"minWords":0,"maxWords":1000},"deny":true}]}`, up.URL)
		targets = append(targets, &target{name: "portkey", url: pk, hdr: http.Header{"X-Portkey-Config": {cfg}}})
	}
	client := &http.Client{Transport: upstream.NewClient().Transport}
	defer client.CloseIdleConnections()
	do := func(t *target) time.Duration {
		req, _ := http.NewRequest("POST", t.url+"/v1/chat/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range t.hdr {
			req.Header[k] = v
		}
		t0 := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatalf("%s: %v", t.name, err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		d := time.Since(t0)
		var ans struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if resp.StatusCode != 200 || json.Unmarshal(out, &ans) != nil || len(ans.Choices) == 0 || len(ans.Choices[0].Message.Content) < 100 {
			b.Fatalf("%s: %d %.300s", t.name, resp.StatusCode, out)
		}
		return d
	}
	for range 20 {
		for _, t := range targets {
			do(t)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		for _, t := range targets {
			t.lat = append(t.lat, do(t))
		}
	}
	direct := targets[0]
	for _, t := range targets {
		b.ReportMetric(float64(pct(t.lat, .5))/1e3, t.name+"-p50-µs")
		b.ReportMetric(float64(pct(t.lat, .99))/1e3, t.name+"-p99-µs")
		if t != direct {
			b.ReportMetric(float64(pct(t.lat, .5)-pct(direct.lat, .5))/1e3, t.name+"-added-p50-µs")
		}
	}
}

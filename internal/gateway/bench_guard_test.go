package gateway

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// BenchmarkOptimisticGuardTTFB measures what a slow guard model costs the
// client with release: optimistic: the time to the first content byte
// through the gateway, with a guard that takes 1 s per verdict, against
// the same upstream asked directly. The guard is asked from the first
// chunk on (cadence_tokens: 1). It reports the medians and their
// difference (added-ms/p50); optimistic release must not wait for the
// guard, so the difference is the gateway's own overhead.
//
//	go test -run '^$' -bench OptimisticGuardTTFB -benchtime 200x ./internal/gateway/
func BenchmarkOptimisticGuardTTFB(b *testing.B) { benchGuardTTFB(b, "release: optimistic\n") }

// BenchmarkWatermarkGuardTTFB is the same with release: watermark, where
// the first text waits for the guard's first verdict (about 1 s), and
// with max_hold: 100ms, where it waits at most that long. It documents
// the trade against optimistic release; run it with a small -benchtime
// (each request waits for the guard).
func BenchmarkWatermarkGuardTTFB(b *testing.B) {
	b.Run("no-max-hold", func(b *testing.B) { benchGuardTTFB(b, "release: watermark\n") })
	b.Run("max-hold-100ms", func(b *testing.B) { benchGuardTTFB(b, "release: watermark\nmax_hold: 100ms\n") })
}

func benchGuardTTFB(b *testing.B, release string) {
	var guardCalls atomic.Int64
	guard := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		guardCalls.Add(1)
		select {
		case <-time.After(time.Second):
		case <-r.Context().Done():
			return
		}
		w.Write([]byte(`{"content":"pass","completion_probabilities":[]}`))
	}))
	defer guard.Close()
	chunks := []string{`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null},"finish_reason":null}]}`}
	for range 64 {
		chunks = append(chunks, chatChunk("The quick brown fox jumps. "))
	}
	body := sseBody(append(chunks, finishChunk)...)
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(body)
	}))
	defer upSrv.Close()
	up := mustUpstream(b, "fake", upSrv.URL, upstream.KindLlamaServer)
	pol := mustPolicy(b, release+"checks:\n  repetition: false\n  guard_llm: {url: "+guard.URL+", protocol: verdict-json, deadline: 2s, cadence_tokens: 1}\n")
	gw := httptest.NewServer(&Gateway{Upstreams: []*upstream.Upstream{up}, Policy: pol})
	defer gw.Close()

	req := `{"messages":[{"role":"user","content":"tell"}],"stream":true}`
	ttfb := func(url string) time.Duration {
		t0 := time.Now()
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(req))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.Contains(sc.Text(), `"content":"The`) {
				return time.Since(t0)
			}
		}
		b.Fatal("no content")
		return 0
	}
	var direct, via []time.Duration
	b.ResetTimer()
	for range b.N {
		direct = append(direct, ttfb(upSrv.URL))
		via = append(via, ttfb(gw.URL))
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Millisecond)
	}
	pd, pv := p50(direct), p50(via)
	b.ReportMetric(pd, "direct-ms/p50")
	b.ReportMetric(pv, "gateway-ms/p50")
	b.ReportMetric(pv-pd, "added-ms/p50")
	b.ReportMetric(float64(guardCalls.Load())/float64(b.N), "guard-calls/op")
}

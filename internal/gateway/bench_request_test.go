package gateway

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// BenchmarkStreamRequest is one whole streamed request (the recorded
// 200-token llama-server answer replayed at full speed) through a plain
// httputil.ReverseProxy and through Aegis with the default policy, eight
// clients at once. One op is one request; its time and allocations
// include the in-process upstream and client, which are the same for
// both, so the difference is what Aegis adds per request.
func BenchmarkStreamRequest(b *testing.B) {
	upURL := replay(b, recorded(b, "llama-chat-200.sse"), 0).URL
	up := mustUpstream(b, "up", upURL, upstream.KindLlamaServer)
	targets := []struct{ name, url string }{
		{"proxy", reverseProxy(b, upURL).URL},
		{"aegis", start(b, &Gateway{Upstreams: []*upstream.Upstream{up}}).URL},
	}
	for _, t := range targets {
		b.Run(t.name, func(b *testing.B) {
			client := &http.Client{Transport: upstream.NewClient().Transport}
			defer client.CloseIdleConnections()
			url := t.url + "/v1/chat/completions"
			b.SetParallelism(4) // 8 clients on 2 cores
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				buf := make([]byte, 32<<10)
				for pb.Next() {
					resp, err := client.Post(url, "application/json", bytes.NewReader(benchBody))
					if err != nil {
						b.Error(err)
						return
					}
					n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
					resp.Body.Close()
					if err != nil || resp.StatusCode != http.StatusOK || n < 30<<10 {
						b.Errorf("status %d, %d bytes, %v", resp.StatusCode, n, err)
						return
					}
				}
			})
		})
	}
}

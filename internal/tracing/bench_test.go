package tracing_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aegis-sentinel/aegis/internal/gateway"
	"github.com/aegis-sentinel/aegis/internal/tracing"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// BenchmarkRequest measures a streamed 128-chunk request through the
// gateway (default policy) against a local fake upstream, with tracing
// off (nothing wrapped) and on (every span built and handed to a batching
// exporter that discards them): the difference is what tracing costs a
// request.
func BenchmarkRequest(b *testing.B) {
	words := make([]string, 128)
	for i := range words {
		words[i] = "word "
	}
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			var p *tracing.Provider
			if on {
				tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
				defer tp.Shutdown(context.Background())
				p = tracing.NewProvider(tp)
			}
			us := httptest.NewServer(&fakeUpstream{answers: [][]string{words}})
			defer us.Close()
			u, err := upstream.New("fake", us.URL, upstream.KindLlamaServer)
			if err != nil {
				b.Fatal(err)
			}
			defer u.Client.CloseIdleConnections()
			u.Client.Transport = p.Transport(u.Client.Transport, func() string { return "llama.cpp" })
			gs := httptest.NewServer(p.Handler(&gateway.Gateway{Upstreams: []*upstream.Upstream{u}}))
			defer gs.Close()
			body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, gs.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Traceparent", clientParent)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}

package gateway

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// BenchmarkStreamSideBySide is the streaming counterpart of
// BenchmarkNonStreamSideBySide: the same streaming chat request against
// one replayed llama-server stream (250 µs per chunk), sent directly,
// through a plain httputil.ReverseProxy, through Aegis with its default
// policy plus a word-count check, and, when AEGIS_BENCH_PORTKEY_URL names
// a running Portkey gateway, through Portkey configured with the
// equivalent default.wordCount output guardrail. The paths are
// interleaved round by round; it reports time to first token and the
// added per-chunk time of each path against the direct request.
//
// Portkey runs its output guardrails after a response is complete, so on
// a stream it forwards every chunk unjudged: in this comparison it is a
// pass-through proxy, while Aegis checks every chunk before releasing it.
// scripts/bench-overhead starts Portkey (with a fetch shim for its
// Node "TypeError: immutable" streaming bug) and runs this benchmark.
func BenchmarkStreamSideBySide(b *testing.B) {
	up := replay(b, recorded(b, "llama-chat-200.sse"), 250*time.Microsecond)
	u := mustUpstream(b, "replay", up.URL, upstream.KindLlamaServer)
	aegis := start(b, &Gateway{Upstreams: []*upstream.Upstream{u}, Policy: mustPolicy(b, "checks: {length: {max_words: 1000}}\n")})
	proxy := reverseProxy(b, up.URL)
	type target struct {
		name, url string
		hdr       http.Header
		ttft, per []time.Duration
	}
	targets := []*target{{name: "direct", url: up.URL}, {name: "proxy", url: proxy.URL}, {name: "aegis", url: aegis.URL}}
	if pk := os.Getenv("AEGIS_BENCH_PORTKEY_URL"); pk != "" {
		cfg := fmt.Sprintf(`{"provider":"openai","custom_host":"%s/v1","api_key":"x","output_guardrails":[{"default.wordCount":{"minWords":0,"maxWords":1000},"deny":true}]}`, up.URL)
		targets = append(targets, &target{name: "portkey", url: pk, hdr: http.Header{"X-Portkey-Config": {cfg}}})
	}
	client := &http.Client{Transport: &headerTransport{base: upstream.NewClient().Transport, hdr: map[string]http.Header{}}}
	for _, t := range targets {
		client.Transport.(*headerTransport).hdr[t.url] = t.hdr
	}
	defer client.CloseIdleConnections()
	round := func() ([]sample, error) {
		out := make([]sample, len(targets))
		for i, t := range targets {
			s, err := measure(client, t.url+"/v1/chat/completions", benchBody)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
			if s.ttft == 0 {
				return nil, fmt.Errorf("%s: no content in the stream", t.name)
			}
			out[i] = s
		}
		for i, s := range out[1:] {
			if s.content != out[0].content {
				return nil, fmt.Errorf("%s: content differs from the direct stream:\n%q\n%q", targets[i+1].name, s.content, out[0].content)
			}
		}
		return out, nil
	}
	for range 10 { // warm the connection pools and Portkey's JIT
		if _, err := round(); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		s, err := round()
		if err != nil {
			b.Fatal(err)
		}
		n := time.Duration(max(1, s[0].chunks))
		for i, t := range targets {
			t.ttft = append(t.ttft, s[i].ttft)
			t.per = append(t.per, (s[i].total-s[0].total)/n)
		}
	}
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	direct := targets[0]
	for _, t := range targets {
		b.ReportMetric(us(pct(t.ttft, .5)), t.name+"-ttft-p50-µs")
		if t == direct {
			continue
		}
		added := make([]time.Duration, len(t.ttft))
		for i := range t.ttft {
			added[i] = t.ttft[i] - direct.ttft[i]
		}
		b.ReportMetric(us(pct(added, .5)), t.name+"-added-ttft-p50-µs")
		b.ReportMetric(us(pct(added, .99)), t.name+"-added-ttft-p99-µs")
		b.ReportMetric(us(pct(t.per, .5)), t.name+"-added-chunk-p50-µs")
	}
}

// headerTransport adds per-target request headers (Portkey's config).
type headerTransport struct {
	base http.RoundTripper
	hdr  map[string]http.Header // by target base URL
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	base := r.URL.Scheme + "://" + r.URL.Host
	if h := t.hdr[base]; len(h) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h {
			r.Header[k] = v
		}
	}
	return t.base.RoundTrip(r)
}

// CloseIdleConnections passes through to the base transport.
func (t *headerTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

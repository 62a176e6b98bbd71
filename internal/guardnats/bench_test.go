package guardnats

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// cannedGuard is an HTTP guard server that answers every /completion at
// once with a "pass" verdict token, so a benchmark measures the transport
// and not the model.
func cannedGuard(b *testing.B) *httptest.Server {
	b.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"content":"pass","completion_probabilities":[{"token":"pass","logprob":-0.1,` +
			`"top_logprobs":[{"token":"pass","logprob":-0.1},{"token":"fail","logprob":-2.4}]}],` +
			`"timings":{"prompt_n":40,"cache_n":32,"predicted_n":1}}`))
	}))
	b.Cleanup(srv.Close)
	return srv
}

func percentile(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

// BenchmarkAddedLatency measures what NATS adds to one guard call: the
// same verdict asked of the same guard server directly over HTTP and
// through NATS and a guard worker, alternating, on loopback. It reports
// the p50 and p99 of each path and their difference (added-p99-ms is the
// figure to hold under 1 ms).
func BenchmarkAddedLatency(b *testing.B) {
	n := testbed.StartNATS(b)
	srv := cannedGuard(b)
	direct := &llm.Client{BaseURL: srv.URL, Kind: llm.KindLlama, Slot: -1, HTTP: &http.Client{}}
	wnc := dial(b, n)
	w := &Worker{NC: wnc, ID: "bench", Model: "bench", Judge: &llm.Client{BaseURL: srv.URL, Kind: llm.KindLlama, Slot: -1, HTTP: &http.Client{}}, Log: quiet}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	s := NewSession(dial(b, n), "bench", nil)
	j := llm.Judgement{Protocol: "verdict-json", Task: "safety", Text: "Once upon a time there was a little cat."}
	call := func(jd llm.Judge) time.Duration {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		t0 := time.Now()
		if _, err := jd.Judge(cctx, j); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	for range 50 { // warm both paths: connections, the worker's subscription
		call(direct)
		call(s)
	}
	var dd, nd []time.Duration
	b.ResetTimer()
	for range b.N {
		dd = append(dd, call(direct))
		nd = append(nd, call(s))
	}
	b.StopTimer()
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(percentile(dd, 50)), "direct-p50-ms")
	b.ReportMetric(ms(percentile(dd, 99)), "direct-p99-ms")
	b.ReportMetric(ms(percentile(nd, 50)), "nats-p50-ms")
	b.ReportMetric(ms(percentile(nd, 99)), "nats-p99-ms")
	b.ReportMetric(ms(percentile(nd, 50)-percentile(dd, 50)), "added-p50-ms")
	b.ReportMetric(ms(percentile(nd, 99)-percentile(dd, 99)), "added-p99-ms")
}

// BenchmarkThroughput is the capacity of the bridge itself: guard calls
// per second from parallel callers through NATS to two workers whose
// judge answers at once.
func BenchmarkThroughput(b *testing.B) {
	n := testbed.StartNATS(b)
	for _, id := range []string{"a", "b"} {
		w := &Worker{NC: dial(b, n), ID: id, Model: "bench", Judge: &countJudge{}, Concurrency: 32, Log: quiet}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); w.Run(ctx) }()
		b.Cleanup(func() { cancel(); <-done })
	}
	nc := dial(b, n)
	j := llm.Judgement{Protocol: "verdict-json", Task: "safety", Text: "Once upon a time there was a little cat."}
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		s := NewSession(nc, "bench", nil) // one response per goroutine
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := s.Judge(ctx, j)
			cancel()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}

func dial(b *testing.B, n *testbed.Engine) *nats.Conn {
	b.Helper()
	nc, err := nats.Connect(n.URL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	return nc
}

// BenchmarkThroughputLlama is guard calls per second through NATS to two
// workers fronting the testbed's real llama-servers (CPU and Vulkan0)
// with its tiny model: end-to-end verdicts, bounded by the servers.
func BenchmarkThroughputLlama(b *testing.B) {
	env := testbed.Require(b, "llama-cpu", "llama-vulkan")
	n := testbed.StartNATS(b)
	for id, url := range map[string]string{"cpu": env.LlamaCPUURL, "vulkan0": env.LlamaVulkanURL} {
		w := &Worker{NC: dial(b, n), ID: id, Model: "stories", Concurrency: 2, Log: quiet,
			Judge: &llm.Client{BaseURL: url, Kind: llm.KindLlama, Slot: -1, HTTP: &http.Client{}}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); w.Run(ctx) }()
		b.Cleanup(func() { cancel(); <-done })
	}
	nc := dial(b, n)
	j := llm.Judgement{Protocol: "verdict-json", Task: "safety", Text: "Once upon a time there was a little cat. It liked to play in the sun."}
	b.SetParallelism(2)
	start := time.Now()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		s := NewSession(nc, "stories", nil)
		for pb.Next() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, err := s.Judge(ctx, j)
			cancel()
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}

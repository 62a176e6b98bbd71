package metrics

import (
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
)

// BenchmarkObserveRequest measures the metrics work for one whole request
// lifecycle (started, attempt, verdict, finished), off the request path.
func BenchmarkObserveRequest(b *testing.B) {
	c := New(nil)
	evs := []events.Event{
		{Kind: events.RequestStarted, RequestID: "r", Route: "/v1/chat/completions", Upstream: "llama"},
		{Kind: events.AttemptStarted, RequestID: "r", Upstream: "llama", Attempt: 1},
		{Kind: events.Verdict, RequestID: "r", Upstream: "llama", Verdict: pass, VerdictDelay: 80 * time.Microsecond},
		{Kind: events.RequestFinished, RequestID: "r", Route: "/v1/chat/completions", Upstream: "llama", Outcome: "released",
			TTFT: 40 * time.Millisecond, AddedTTFT: 200 * time.Microsecond, Duration: time.Second, HeldBytes: 12, Tokens: 40},
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, e := range evs {
			c.Observe(e)
		}
	}
}

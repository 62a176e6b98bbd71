package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// BenchmarkObserve measures one event through the dashboard (ring, totals
// and the JSON sent to each open page), with 0 and 4 pages open.
func BenchmarkObserve(b *testing.B) {
	for _, pages := range []int{0, 4} {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			var bus events.Bus
			d := New(&bus, nil)
			defer d.Close()
			stop := make(chan struct{})
			for i := 0; i < pages; i++ {
				c := make(chan message, clientBuffer)
				d.clients[c] = struct{}{}
				go func() { // a page that keeps up
					for {
						select {
						case <-c:
						case <-stop:
							return
						}
					}
				}()
			}
			defer close(stop)
			e := events.Event{Kind: events.Verdict, RequestID: "aegis-0123456789abcdef", Route: "/v1/chat/completions",
				Upstream: "llama", Model: "stories", Attempt: 1, Time: time.Now(),
				Verdict: &validator.Verdict{Verdict: validator.Fail, Reason: validator.ReasonRepetitionLoop, Action: validator.ActionRetryWithCorrection,
					Findings: []validator.Finding{{Check: "repetition", Start: 10, End: 40, Message: "loop"}}}}
			b.ReportAllocs()
			for b.Loop() {
				d.Observe(e)
			}
		})
	}
}

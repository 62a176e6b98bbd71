package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

// BenchmarkEvents is the live-event capacity of one gateway: events
// published on its bus, sent to NATS and received by a watcher, per
// second. Events the bus or NATS could not carry show as lost.
func BenchmarkEvents(b *testing.B) {
	n := testbed.StartNATS(b)
	nc, err := nats.Connect(n.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	watcher, err := nats.Connect(n.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer watcher.Close()
	got := make(chan struct{}, 1)
	var received int
	watcher.Subscribe(SubjectEvents+".>", func(*nats.Msg) {
		received++
		if received == b.N {
			got <- struct{}{}
		}
	})
	watcher.Flush()
	var bus events.Bus
	g := NewGateway(nc, &bus, "bench", "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	defer func() { cancel(); <-done }()
	e := events.Event{Kind: events.RequestFinished, RequestID: "req-0123456789", Route: "/v1/chat/completions",
		Upstream: "llama", Model: "stories", Outcome: "released", Status: 200, TTFT: time.Millisecond, Duration: time.Second}
	start := time.Now()
	b.ResetTimer()
	for i := range b.N {
		bus.Publish(e)
		if i%1000 == 999 {
			for g.Published()+bus.Dropped() < uint64(i)-500 { // let the publisher keep up, as real traffic would
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	select {
	case <-got:
	case <-time.After(10 * time.Second):
	}
	b.StopTimer()
	b.ReportMetric(float64(received)/time.Since(start).Seconds(), "events/s")
	b.ReportMetric(float64(b.N-received), "lost")
}

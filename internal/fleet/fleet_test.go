package fleet

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/aegis-sentinel/aegis/internal/clock"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

func TestGatewayPublishesAndAnnounces(t *testing.T) {
	n := testbed.StartNATS(t)
	nc, err := Connect(n.URL, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	watcher, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	got := make(chan *nats.Msg, 16)
	if _, err := watcher.ChanSubscribe(SubjectEvents+".>", got); err != nil {
		t.Fatal(err)
	}
	watcher.Flush()

	var bus events.Bus
	g := NewGateway(nc, &bus, "gw a", "127.0.0.1:8088")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	defer func() { cancel(); <-done }()

	bus.Publish(events.Event{Kind: events.RequestStarted, RequestID: "r1"})
	bus.Publish(events.Event{Kind: events.Halt, RequestID: "r1"})
	bus.Publish(events.Event{Kind: events.RequestFinished, RequestID: "r1", Outcome: "halted", Text: "secret output"})
	for i, want := range []string{"request_started", "halt", "request_finished"} {
		m := <-got
		if m.Subject != "aegis.events.gw_a" {
			t.Errorf("subject %q", m.Subject)
		}
		var e events.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			t.Fatal(err)
		}
		if e.Kind.String() != want || e.RequestID != "r1" {
			t.Errorf("event %d = %+v, want %s", i, e, want)
		}
		if e.Text != "" {
			t.Errorf("event %d carries the output text", i)
		}
	}
	ms, err := RollCall(context.Background(), watcher, 300*time.Millisecond)
	if err != nil || len(ms) != 1 {
		t.Fatalf("roll call = %+v, %v", ms, err)
	}
	m := ms[0]
	if m.Role != RoleGateway || m.ID != "gw a" || m.Totals == nil || m.Totals.Requests != 1 || m.Totals.Halts != 1 ||
		m.Totals.InFlight != 0 || m.Totals.Outcomes["halted"] != 1 || m.Totals.Events != 3 {
		t.Errorf("member %+v totals %+v", m, m.Totals)
	}
}

func TestViewForgetsSilentMembers(t *testing.T) {
	n := testbed.StartNATS(t)
	nc, err := nats.Connect(n.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	now := time.Unix(1000, 0)
	clk := clock.NewFake(now)
	v, err := Watch(context.Background(), nc, clk)
	if err != nil {
		t.Fatal(err)
	}
	heard := make(chan struct{})
	// A second subscriber tells when the announcement was delivered.
	nc.Subscribe(SubjectAnnounce, func(*nats.Msg) { close(heard) })
	nc.Flush()
	b, _ := json.Marshal(Member{Role: RoleGuardWorker, ID: "w1", Model: "m", Totals: &Totals{Requests: 2}})
	nc.Publish(SubjectAnnounce, b)
	<-heard
	for len(v.Members()) == 0 { // the View's own delivery may come just after
	}
	if ms := v.Members(); len(ms) != 1 || ms[0].ID != "w1" {
		t.Fatalf("members %+v", ms)
	}
	clk.Set(now.Add(4 * AnnounceEvery))
	if ms := v.Members(); len(ms) != 0 {
		t.Fatalf("silent member kept: %+v", ms)
	}
	if s := Sum([]Member{{Totals: &Totals{Requests: 2, Outcomes: map[string]uint64{"released": 2}}}, {Totals: &Totals{Requests: 3}}}); s.Requests != 5 || s.Outcomes["released"] != 2 {
		t.Errorf("sum %+v", s)
	}
}

func TestToken(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"stories260K", "stories260K"},
		{"llama-guard-3-1b.Q4_K_M", "llama-guard-3-1b_Q4_K_M"},
		{"a b>*", "a_b__"},
		{"", "_"},
	} {
		if got := Token(tc.in); got != tc.want {
			t.Errorf("Token(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestGatewayCountsLostEvents: with NATS down and the reconnect buffer
// full, events are counted as lost, never silently dropped, and nothing
// blocks.
func TestGatewayCountsLostEvents(t *testing.T) {
	n := testbed.StartNATS(t)
	down := make(chan struct{}, 1)
	nc, err := nats.Connect(n.URL, nats.ReconnectBufSize(512), nats.MaxReconnects(-1),
		nats.DisconnectErrHandler(func(*nats.Conn, error) { down <- struct{}{} }))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var bus events.Bus
	g := NewGateway(nc, &bus, "gw", "")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	defer cancel()
	n.Stop()
	<-down
	for g.Member().Totals.EventsLost == 0 {
		bus.Publish(events.Event{Kind: events.RequestStarted, RequestID: "a-request-id-long-enough-to-fill-the-buffer"})
	}
	cancel()
	<-done
	if m := g.Member(); m.Totals.Events+m.Totals.EventsLost != m.Totals.Requests {
		t.Errorf("events unaccounted for: %+v", m.Totals)
	}
}

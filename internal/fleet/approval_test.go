package fleet

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/nats-io/nats.go"
)

// TestGatewayAnnouncesApprovals: a held call's approval stages reach the
// fleet's event subject with their record (tools, paths, hash, policy
// version), for another gateway's dashboard or `aegis fleet`.
func TestGatewayAnnouncesApprovals(t *testing.T) {
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
	g := NewGateway(nc, &bus, "gw-a", "127.0.0.1:8088")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); g.Run(ctx) }()
	defer func() { cancel(); <-done }()

	for _, st := range []string{"proposed", "denied"} {
		bus.Publish(events.Event{Kind: events.Approval, RequestID: "r1", Approval: &events.ApprovalRecord{ID: "apr-1", Stage: st,
			Calls: []events.ApprovalCall{{Tool: "send_email", Paths: []string{"to"}}}, ArgsHash: "sha256:abc", PolicyVersion: "v1"}})
	}
	for _, want := range []string{"proposed", "denied"} {
		m := <-got // go test's -timeout ends a wait that never ends
		var e events.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			t.Fatal(err)
		}
		if e.Kind != events.Approval || e.Approval == nil || e.Approval.Stage != want || e.Approval.ID != "apr-1" ||
			e.Approval.Calls[0].Tool != "send_email" || e.Approval.ArgsHash != "sha256:abc" {
			t.Errorf("event = %s, want the %s stage of apr-1", m.Data, want)
		}
	}
}

package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/testbed"
)

func heldRecord(id string, at time.Time) events.ApprovalRecord {
	return events.ApprovalRecord{ID: id, RequestID: "req-" + id, Time: at, Deadline: at.Add(10 * time.Minute), Stage: "proposed",
		Calls:  []events.ApprovalCall{{Tool: "send_email", Paths: []string{"body", "to"}}},
		Reason: "data_exfiltration", Rule: "tool_policy: `body` carries 42 bytes of a tool result", ArgsHash: "sha256:aaa", PolicyVersion: "sha256:v1"}
}

// TestPGApprovalsShared: two gateways' stores over one database. A held
// call shows on both; a decision must be bound to the call's hash and
// policy version; of several deciders at once exactly one wins; the
// holder's own stages follow; a restarted gateway's open calls are
// cancelled.
func TestPGApprovalsShared(t *testing.T) {
	pg := testbed.StartPostgres(t)
	ctx := context.Background()
	a := openPG(t, pg.URL, Options{Gateway: "gw-a"}).Approvals()
	b := openPG(t, pg.URL, Options{Gateway: "gw-b"}).Approvals()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

	rec := heldRecord("apr-1", now)
	if err := a.Put(ctx, "gw-a", rec); err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, "gw-a", rec); err != nil { // shared twice: one row
		t.Fatal(err)
	}
	if err := a.Put(ctx, "gw-a", heldRecord("apr-old", now.Add(-time.Hour))); err != nil { // its deadline passed
		t.Fatal(err)
	}
	got, err := b.Pending(ctx, now.Add(time.Second))
	if err != nil || len(got) != 1 || got[0].ID != "apr-1" || got[0].Gateway != "gw-a" || got[0].Calls[0].Tool != "send_email" ||
		got[0].ArgsHash != "sha256:aaa" || got[0].Stage != "proposed" {
		t.Fatalf("pending on gw-b = %+v, %v; want apr-1 held by gw-a", got, err)
	}

	at := now.Add(time.Minute)
	for _, tc := range []struct {
		name string
		id   string
		d    approval.Decision
		want error
	}{
		{"unbound", "apr-1", approval.Decision{Approve: true}, approval.ErrUnbound},
		{"other arguments", "apr-1", approval.Decision{Approve: true, ArgsHash: "sha256:bbb", PolicyVersion: "sha256:v1"}, approval.ErrOtherArgs},
		{"other policy", "apr-1", approval.Decision{Approve: true, ArgsHash: "sha256:aaa", PolicyVersion: "sha256:v2"}, approval.ErrOtherPolicy},
		{"unknown id", "apr-none", approval.Decision{}, approval.ErrNotFound},
		{"past its deadline", "apr-old", approval.Decision{}, approval.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := b.Decide(ctx, tc.id, tc.d, at); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
	if r, err := a.Lookup(ctx, "apr-1"); err != nil || r.Stage != "proposed" {
		t.Fatalf("after refused decisions: %+v, %v; want still proposed", r, err)
	}

	// Eight deciders at once, half approving, half denying: one wins.
	var wg sync.WaitGroup
	wins := make(chan events.ApprovalRecord, 8)
	losses := make(chan error, 8)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := []*PGApprovals{a, b}[i%2]
			r, err := st.Decide(ctx, "apr-1", approval.Decision{Approve: i%2 == 0, ArgsHash: "sha256:aaa", PolicyVersion: "sha256:v1", By: "person"}, at)
			if err != nil {
				losses <- err
				return
			}
			wins <- r
		}()
	}
	wg.Wait()
	close(wins)
	close(losses)
	if len(wins) != 1 {
		t.Fatalf("%d decisions won, want exactly 1", len(wins))
	}
	won := <-wins
	for err := range losses {
		if !errors.Is(err, approval.ErrDecided) {
			t.Errorf("a later decision got %v, want ErrDecided", err)
		}
	}
	decided, err := a.Decided(ctx, []string{"apr-1", "apr-old", "apr-none"})
	if err != nil || len(decided) != 1 || decided[0].Stage != won.Stage || decided[0].By != "person" || decided[0].Gateway != "gw-a" {
		t.Fatalf("decided = %+v, %v; want apr-1 %s by person", decided, err, won.Stage)
	}

	// The holder's stages follow the decision; a proposal never undoes it.
	if err := a.Put(ctx, "gw-a", rec); err != nil {
		t.Fatal(err)
	}
	final := rec
	final.Stage = "released"
	if won.Stage == "denied" {
		final.Stage = "denied"
	}
	if err := a.Put(ctx, "gw-a", final); err != nil {
		t.Fatal(err)
	}
	if r, err := b.Lookup(ctx, "apr-1"); err != nil || r.Stage != final.Stage || r.By != "person" {
		t.Errorf("after the holder's %s: %+v, %v", final.Stage, r, err)
	}
	late := rec
	late.Stage = "cancelled"
	if err := a.Put(ctx, "gw-a", late); err != nil {
		t.Fatal(err)
	}
	if r, _ := b.Lookup(ctx, "apr-1"); r.Stage != final.Stage {
		t.Errorf("a stage after the end replaced %s with %s", final.Stage, r.Stage)
	}

	// gw-a restarts: its open calls are cancelled, gw-b's stay.
	a.Put(ctx, "gw-a", heldRecord("apr-2", now))
	b.Put(ctx, "gw-b", heldRecord("apr-3", now))
	if n, err := a.Abandon(ctx, "gw-a", at); err != nil || n != 2 { // apr-2 and the expired-but-proposed apr-old
		t.Errorf("abandoned %d, %v; want 2", n, err)
	}
	got, _ = b.Pending(ctx, now.Add(time.Second))
	if len(got) != 1 || got[0].ID != "apr-3" {
		t.Errorf("pending after gw-a restarted = %+v; want only gw-b's apr-3", got)
	}
}

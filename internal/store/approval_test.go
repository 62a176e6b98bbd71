package store

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/testbed"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// approvalEvents are the three recorded stages of one approved call.
func approvalEvents() []events.Event {
	rec := events.ApprovalRecord{ID: "apr-1", RequestID: "r1", Reason: "unsafe_content",
		Calls:    []events.ApprovalCall{{Index: 0, Tool: "send_email", Paths: []string{"body", "to"}}},
		Rule:     "tool_policy: body carries 31 bytes of the system prompt to a destination only a tool result named",
		ArgsHash: "sha256:abc", PolicyVersion: "sha256:def"}
	var out []events.Event
	for _, st := range []string{"proposed", "approved", "released"} {
		r := rec
		r.Stage = st
		if st != "proposed" {
			r.By = "cli"
		}
		out = append(out, events.Event{Kind: events.Approval, RequestID: "r1", Approval: &r})
	}
	return out
}

// recordApprovals runs a recorder over w until the three stages are
// stored.
func recordApprovals(t *testing.T, w Writer) {
	t.Helper()
	var bus events.Bus
	rec := NewRecorder(w, &bus)
	added := make(chan Incident, 8)
	rec.OnAdd = func(i Incident) { added <- i }
	for _, e := range approvalEvents() {
		bus.Publish(e)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- rec.Run(ctx) }()
	for range 3 {
		<-added
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// checkApprovals: each stage is its own incident, naming the tool, the
// paths, the hash, the policy version and who decided.
func checkApprovals(t *testing.T, got []Incident) {
	t.Helper()
	if len(got) != 3 {
		t.Fatalf("got %d incidents, want 3: %+v", len(got), got)
	}
	for i, want := range []string{"approval_released", "approval_approved", "approval_proposed"} { // newest first
		inc := got[i]
		if string(inc.Kind) != want || inc.Reason != "unsafe_content" || inc.Action != validator.ActionApprove || len(inc.Findings) != 1 {
			t.Errorf("incident %d = %+v, want %s", i, inc, want)
			continue
		}
		m := inc.Findings[0].Message
		for _, part := range []string{"apr-1", "send_email(body, to)", "sha256:abc", "policy sha256:def", "31 bytes of the system prompt"} {
			if !strings.Contains(m, part) {
				t.Errorf("%s: message %q lacks %q", want, m, part)
			}
		}
		if by := strings.Contains(m, "by cli"); by != (want != "approval_proposed") {
			t.Errorf("%s: message %q names the decider: %v", want, m, by)
		}
	}
}

func TestRecorderApprovalStagesSQLite(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "i.db"), Options{})
	recordApprovals(t, s)
	got, err := s.List(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	checkApprovals(t, got)
}

func TestRecorderApprovalStagesPostgres(t *testing.T) {
	pg := testbed.StartPostgres(t)
	p := openPG(t, pg.URL, Options{Gateway: "gw-a"})
	recordApprovals(t, p)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := p.List(context.Background(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	checkApprovals(t, got)
}

package dashboard

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/approval"
	"github.com/aegis-sentinel/aegis/internal/browsertest"
	"github.com/aegis-sentinel/aegis/internal/events"
)

// TestApprovalsInBrowser: a real headless Chromium shows the held call
// (tool, argument paths, rule; no value) and its Approve button releases
// it bound to the hash and policy version the page showed.
func TestApprovalsInBrowser(t *testing.T) {
	ctx := browsertest.New(t, 1440, 1000)
	var bus events.Bus
	q := &approval.Queue{}
	d := New(&bus, nil)
	d.Approvals = q.Desk()
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(runCtx); close(done) }()
	srv := httptest.NewServer(d)
	t.Cleanup(func() { stop(); <-done; srv.Close() })

	rec := events.ApprovalRecord{RequestID: "chatcmpl-mail1", Time: time.Now(), Deadline: time.Now().Add(10 * time.Minute),
		Calls:  []events.ApprovalCall{{Tool: "send_email", Paths: []string{"body", "to"}}},
		Reason: "data_exfiltration", Rule: "tool_policy: body carries 31 bytes of the system prompt to a destination only a tool result named",
		ArgsHash: "sha256:abc123", PolicyVersion: "sha256:v1"}
	tk := q.Hold(rec)
	browsertest.Navigate(t, ctx, srv.URL+"/ui/")
	row := `document.querySelector('tr[data-approval-id="` + tk.Record.ID + `"]')`
	browsertest.Wait[bool](t, ctx, `!document.getElementById("approvals-panel").hidden && `+row+`?.querySelector("td.calls")?.textContent === "send_email(body, to)" && `+
		row+`.textContent.includes("31 bytes of the system prompt")`, 15*time.Second, `document.getElementById("approvals-panel").innerText`)

	// A second call held while the page is open appears on its event.
	tk2 := q.Hold(rec)
	bus.Publish(events.Event{Kind: events.Approval, RequestID: rec.RequestID, Approval: &tk2.Record})
	browsertest.Wait[bool](t, ctx, `document.querySelectorAll("#approvals tr").length === 2`, 10*time.Second, `document.getElementById("approvals").innerText`)

	browsertest.Wait[bool](t, ctx, `(`+row+`.querySelector("button.approve").click(), true)`, 5*time.Second, "")
	select {
	case o := <-tk.Done():
		if o.Stage != approval.Approved || o.ArgsHash != rec.ArgsHash || o.PolicyVersion != rec.PolicyVersion || o.By != "dashboard" {
			t.Errorf("outcome = %+v", o)
		}
	case <-time.After(30 * time.Second): // a hang, not a timing assertion
		t.Fatal("the page's approval never reached the queue")
	}
	browsertest.Wait[bool](t, ctx, `document.querySelectorAll("#approvals tr").length === 1`, 10*time.Second, `document.getElementById("approvals").innerText`)
	browsertest.Screenshot(t, ctx, "dashboard-approvals.png")
}

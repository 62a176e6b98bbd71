package dashboard

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/browsertest"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestToolNamesInBrowser: a request whose answer made tool calls shows
// each call's tool and outcome in its row (from the verdict event), and
// an incident's finding at a call's argument names where it is.
func TestToolNamesInBrowser(t *testing.T) {
	ctx := browsertest.New(t, 1440, 1000)
	var bus events.Bus
	d := New(&bus, nil)
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { d.Run(runCtx); close(done) }()
	srv := httptest.NewServer(d)
	t.Cleanup(func() { d.Close(); stop(); <-done; srv.Close() })

	browsertest.Navigate(t, ctx, srv.URL+"/ui/")
	browsertest.Wait[bool](t, ctx, `document.getElementById("conn").textContent === "live"`, 15*time.Second, `document.body.innerText`)

	const id = "req-tools-1"
	finding := validator.Finding{Check: "leak", Reason: validator.ReasonSecretLeak, Start: 16, End: 32,
		Path: "tool_calls/1/arguments/body", Message: `a secret from the system prompt appears in the output (in the arguments of "send_email")`}
	v := &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskHigh, Reason: validator.ReasonSecretLeak,
		Action: validator.ActionBlock, Findings: []validator.Finding{finding}}
	base := events.Event{RequestID: id, Route: "/v1/chat/completions", Upstream: "llama-cpu", Model: "agent"}
	pub := func(k events.Kind, mod func(*events.Event)) {
		e := base
		e.Kind = k
		mod(&e)
		bus.Publish(e)
	}
	pub(events.RequestStarted, func(*events.Event) {})
	pub(events.AttemptStarted, func(e *events.Event) { e.Attempt = 1 })
	pub(events.Verdict, func(e *events.Event) {
		e.Attempt, e.Verdict = 1, v
		e.ToolCalls = []events.ToolCall{{Tool: "search_docs", Outcome: events.ToolDropped}, {Tool: "send_email", Outcome: events.ToolRefused}}
	})
	pub(events.Halt, func(e *events.Event) { e.Attempt, e.Verdict = 1, v })
	pub(events.RequestFinished, func(e *events.Event) { e.Outcome, e.Status = "blocked", 200 })
	d.IncidentAdded(store.Incident{ID: 7, Kind: store.KindBlock, RequestID: id, Model: "agent", Reason: v.Reason,
		Action: v.Action, Risk: v.Risk, Findings: v.Findings, Time: time.Now()})

	cell := `(document.querySelector('#requests tr[data-request-id="` + id + `"]') || {cells: [{}, {}, {}, {}, {}, {textContent: ""}]}).cells[5].textContent`
	browsertest.Wait[bool](t, ctx, cell+` === "secret_leak tools: search_docs (dropped), send_email (refused)"`, 10*time.Second, cell)
	inc := `(document.querySelector('#incidents [data-incident-id="7"] li') || {textContent: ""}).textContent`
	browsertest.Wait[bool](t, ctx, inc+`.includes('"send_email"') && `+inc+`.includes("at tool_calls/1/arguments/body")`, 10*time.Second, inc)
}

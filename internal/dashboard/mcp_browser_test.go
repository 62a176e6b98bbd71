package dashboard

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/browsertest"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestMCPPanelInBrowser publishes the events `aegis mcp` publishes (a
// call released, a call refused, a tool flagged in a listing) and checks
// that the page's MCP panel counts them per server and tool.
func TestMCPPanelInBrowser(t *testing.T) {
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
	browsertest.Wait[bool](t, ctx, `document.getElementById("mcp").hidden`, 5*time.Second, "")

	call := func(id, route, tool, outcome string, v *validator.Verdict) {
		bus.Publish(events.Event{Kind: events.RequestStarted, RequestID: id, Route: route, Upstream: "filesystem", Model: tool})
		if v != nil {
			bus.Publish(events.Event{Kind: events.Halt, RequestID: id, Route: route, Upstream: "filesystem", Model: tool, Verdict: v})
		}
		bus.Publish(events.Event{Kind: events.RequestFinished, RequestID: id, Route: route, Upstream: "filesystem", Model: tool, Outcome: outcome})
	}
	refused := &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskHigh, Reason: validator.ReasonSecretLeak, Action: validator.ActionBlock}
	call("mcp-1", "mcp tools/call", "read_file", "released", nil)
	call("mcp-2", "mcp tools/call", "read_file", "blocked", refused)
	call("mcp-3", "mcp tools/list", "add", "blocked", &validator.Verdict{Verdict: validator.Fail, Reason: validator.ReasonPromptInjection, Action: validator.ActionBlock})

	rows := `Array.from(document.querySelectorAll("#mcp-tools tr")).map(r => Array.from(r.cells).map(c => c.textContent).join("|")).join("\n")`
	browsertest.Wait[bool](t, ctx, `!document.getElementById("mcp").hidden && `+rows+` === "filesystem|add|0|–|flagged 1×\nfilesystem|read_file|2|released 1, blocked 1|"`, 10*time.Second, rows)
	browsertest.Screenshot(t, ctx, "dashboard-mcp.png")
}

package dashboard

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/browsertest"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// TestRequestTableFitsAt1280: on a 1280-px-wide window the request table
// stays inside its card, with long request ids, model and upstream names
// and reasons in its rows; the page does not scroll sideways.
func TestRequestTableFitsAt1280(t *testing.T) {
	ctx := browsertest.New(t, 1280, 900)
	var bus events.Bus
	d := New(&bus, nil)
	srv := httptest.NewServer(d)
	done := make(chan struct{})
	runCtx, stop := context.WithCancel(context.Background())
	go func() { d.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done; srv.Close() })

	browsertest.Navigate(t, ctx, srv.URL+"/ui/")
	browsertest.Wait[bool](t, ctx, `document.getElementById("conn").textContent === "live"`, 15*time.Second, `document.body.innerText`)
	leak := &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskHigh, Reason: validator.ReasonSystemPromptLeak, Action: validator.ActionHalt}
	for i := range 12 {
		l := lifecycle{id: fmt.Sprintf("chatcmpl-%032x", i), model: "qwen2.5-coder-32b-instruct-q4_k_m-long-model-name",
			outcome: "repaired", fails: []*validator.Verdict{loopVerdict}, ttft: 1234 * time.Millisecond, dur: 123456 * time.Millisecond}
		if i%3 == 0 {
			l.outcome, l.fails = "halted", []*validator.Verdict{leak}
		}
		l.publish(&bus)
	}
	browsertest.Wait[bool](t, ctx, `document.querySelectorAll("#requests tr").length === 12`, 10*time.Second, `document.body.innerText`)
	const fits = `(() => {
		const card = document.querySelector("section.requests").getBoundingClientRect();
		const table = document.querySelector("section.requests table").getBoundingClientRect();
		return table.right <= card.right + 0.5 && document.documentElement.scrollWidth <= window.innerWidth;
	})()`
	const describe = `(() => {
		const card = document.querySelector("section.requests").getBoundingClientRect();
		const table = document.querySelector("section.requests table").getBoundingClientRect();
		return "table right " + table.right + ", card right " + card.right + ", page " + document.documentElement.scrollWidth + " of " + window.innerWidth;
	})()`
	defer browsertest.Screenshot(t, ctx, "dashboard-1280.png")
	browsertest.Wait[bool](t, ctx, fits, 5*time.Second, describe)
}

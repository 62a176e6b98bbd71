package dashboard

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aegis-sentinel/aegis/internal/browsertest"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/store"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// lifecycle publishes one request's events the way the gateway does.
type lifecycle struct {
	id, model, outcome string
	fails              []*validator.Verdict // failed attempts, in order
	text               string               // output of the last failed attempt (text logging on)
	ttft, dur          time.Duration
}

func (l lifecycle) publish(bus *events.Bus) {
	base := events.Event{RequestID: l.id, Route: "/v1/chat/completions", Upstream: "llama-cpu", Model: l.model, Stream: true}
	ev := func(k events.Kind, mod func(*events.Event)) {
		e := base
		e.Kind = k
		if mod != nil {
			mod(&e)
		}
		bus.Publish(e)
	}
	ev(events.RequestStarted, nil)
	attempt := 1
	for i, v := range l.fails {
		ev(events.AttemptStarted, func(e *events.Event) { e.Attempt = attempt })
		ev(events.Verdict, func(e *events.Event) { e.Attempt, e.Verdict = attempt, v })
		kind := events.Retry
		if v.Action == validator.ActionHalt {
			kind = events.Halt
		}
		ev(kind, func(e *events.Event) {
			e.Attempt, e.Verdict = attempt, v
			if i == len(l.fails)-1 {
				e.Text = l.text
			}
		})
		attempt++
	}
	if l.outcome != "halted" {
		ev(events.AttemptStarted, func(e *events.Event) { e.Attempt = attempt })
		ev(events.Verdict, func(e *events.Event) {
			e.Attempt, e.VerdictDelay = attempt, 90*time.Microsecond
			e.Verdict = &validator.Verdict{Verdict: validator.Pass, Action: validator.ActionRelease, Findings: []validator.Finding{}}
		})
	}
	if l.outcome == "running" {
		return
	}
	ev(events.RequestFinished, func(e *events.Event) {
		e.Outcome, e.Status, e.TTFT, e.Duration = l.outcome, 200, l.ttft, l.dur
		e.AddedTTFT, e.HeldBytes, e.Tokens = 180*time.Microsecond+l.ttft/400, 12, 48
	})
}

const (
	loopText = "Once upon a time, there was the little dog the little dog the little dog that ran."
	leakText = "Sure, here it is: sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a and done"
	jsonText = `{"name": "Ada", "age": 36,, "city": "London"}`
)

// span returns the byte offsets of sub in s.
func span(s, sub string) (int, int) {
	i := strings.Index(s, sub)
	return i, i + len(sub)
}

var (
	loopStart, loopEnd = span(loopText, "the little dog the little dog the little dog ")
	leakStart, leakEnd = span(leakText, "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a")
	jsonStart          = strings.Index(jsonText, ",,") + 1
)

var (
	loopVerdict = &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskMedium, Reason: validator.ReasonRepetitionLoop,
		Action: validator.ActionRetryWithCorrection, Findings: []validator.Finding{{Check: "repetition", Reason: validator.ReasonRepetitionLoop,
			Start: loopStart, End: loopEnd, Message: `"the little dog " repeated 3 times`}}}
	leakVerdict = &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskHigh, Reason: validator.ReasonSecretLeak,
		Action: validator.ActionHalt, Findings: []validator.Finding{{Check: "secret", Reason: validator.ReasonSecretLeak,
			Start: leakStart, End: leakEnd, Message: "looks like a live API key"}}}
	jsonVerdict = &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskLow, Reason: validator.ReasonInvalidJSON,
		Action: validator.ActionRetryStricterFormat, Findings: []validator.Finding{{Check: "json_syntax", Reason: validator.ReasonInvalidJSON,
			Start: jsonStart, End: jsonStart + 1, Message: "unexpected ',' after ','"}}}
)

// TestDashboardInBrowser loads /ui in headless Chromium, feeds synthetic
// request lifecycles through a real bus, incident recorder and SQLite log,
// and checks what the page shows. The gateway-driven version of this test
// lives with `aegis serve` (internal/cli).
func TestDashboardInBrowser(t *testing.T) {
	ctx := browsertest.New(t, 1440, 1000)

	st, err := store.Open(filepath.Join(t.TempDir(), "incidents.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var bus events.Bus
	d := New(&bus, st)
	rec := store.NewRecorder(st, &bus)
	rec.OnAdd = d.IncidentAdded
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { d.Run(runCtx); done <- struct{}{} }()
	go func() { rec.Run(runCtx); done <- struct{}{} }()
	srv := httptest.NewServer(d)
	t.Cleanup(func() { stop(); <-done; <-done; srv.Close() })

	// One incident from "before the page was opened".
	lifecycle{id: "chatcmpl-7d1e0c", model: "stories", outcome: "repaired", fails: []*validator.Verdict{jsonVerdict},
		text: jsonText, ttft: 61 * time.Millisecond, dur: 540 * time.Millisecond}.publish(&bus)

	browsertest.Navigate(t, ctx, srv.URL+"/ui/")
	browsertest.Wait[bool](t, ctx, `document.getElementById("conn").textContent === "live"`, 15*time.Second, `document.body.innerText`)

	for i, ms := range []int{42, 55, 38, 70, 47, 52, 44, 90, 39, 58} {
		lifecycle{id: fmt.Sprintf("chatcmpl-a%02d", i), model: "stories", outcome: "released",
			ttft: time.Duration(ms) * time.Millisecond, dur: time.Duration(ms*9+100) * time.Millisecond}.publish(&bus)
	}
	lifecycle{id: "chatcmpl-loop42", model: "stories", outcome: "repaired", fails: []*validator.Verdict{loopVerdict},
		text: loopText,
		ttft: 66 * time.Millisecond, dur: 1300 * time.Millisecond}.publish(&bus)
	lifecycle{id: "chatcmpl-leak99", model: "stories", outcome: "halted", fails: []*validator.Verdict{leakVerdict},
		text: leakText}.publish(&bus)
	lifecycle{id: "chatcmpl-busy", model: "stories", outcome: "running"}.publish(&bus)
	bus.Publish(events.Event{Kind: events.GuardStatus, GuardDevice: "CPU", GuardState: "ready", Upstream: "guard-cpu"})
	bus.Publish(events.Event{Kind: events.GuardStatus, GuardDevice: "Vulkan0", GuardState: "starting", Upstream: "guard-vulkan"})
	bus.Publish(events.Event{Kind: events.GuardStatus, GuardDevice: "Vulkan0", GuardState: "ready", Upstream: "guard-vulkan"})
	for i := 0; i < 5; i++ {
		bus.Publish(events.Event{Kind: events.Verdict, RequestID: "g", GuardDevice: "CPU", Duration: time.Duration(30+i) * time.Millisecond})
	}

	row := func(id string) string { return `document.querySelector('tr[data-request-id="` + id + `"]')` }
	describe := `Array.from(document.querySelectorAll("#requests tr")).map(r => r.dataset.requestId + "=" + r.dataset.outcome + ":" + r.dataset.reason).join(" ")`
	tests := []struct {
		name, expr string
	}{
		{"released row", row("chatcmpl-a03") + `?.dataset.outcome === "released"`},
		{"repaired loop row with reason", row("chatcmpl-loop42") + `?.dataset.outcome === "repaired" && ` + row("chatcmpl-loop42") + `.dataset.reason === "repetition_loop"`},
		{"halted row with reason", row("chatcmpl-leak99") + `?.dataset.outcome === "halted" && ` + row("chatcmpl-leak99") + `.dataset.reason === "secret_leak"`},
		{"row from before the page opened", row("chatcmpl-7d1e0c") + `?.dataset.outcome === "repaired"`},
		{"running row", row("chatcmpl-busy") + `?.dataset.outcome === "running"`},
		{"totals", `document.getElementById("t-total").textContent === "13" && document.getElementById("t-halted").textContent === "1" && document.getElementById("t-inflight").textContent === "1"`},
		{"reason counts", `document.querySelector('#reasons li[data-reason="secret_leak"] .n')?.textContent === "1"`},
		{"guard devices", `document.querySelector('#guards li[data-device="Vulkan0"] .state')?.textContent === "ready" && document.querySelector('#guards li[data-device="CPU"]')?.textContent.includes("5 calls")`},
		{"chart drawn", `document.querySelectorAll("#chart polyline").length === 3`},
		{"halt incident with the key highlighted", `Array.from(document.querySelectorAll('.incident[data-reason="secret_leak"] mark')).map(m => m.textContent).join("|") === "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a"`},
		{"loop incident highlighted", `document.querySelector('.incident[data-reason="repetition_loop"] mark')?.textContent === "the little dog the little dog the little dog "`},
		{"incident recorded before the page opened", `document.querySelector('.incident[data-reason="invalid_json"] mark')?.textContent === ","`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			browsertest.Wait[bool](t, ctx, tt.expr, 10*time.Second, describe)
		})
	}
	// Reloading rebuilds the same view from the snapshot and the log.
	browsertest.Navigate(t, ctx, srv.URL+"/ui/")
	browsertest.Wait[bool](t, ctx, row("chatcmpl-leak99")+`?.dataset.outcome === "halted" && document.querySelectorAll(".incident").length === 3`, 10*time.Second, describe)
	browsertest.Wait[bool](t, ctx, `document.querySelectorAll("#chart polyline").length === 3`, 5*time.Second, "")
	time.Sleep(300 * time.Millisecond) // let the row highlight animation finish before the screenshot
	path := browsertest.Screenshot(t, ctx, "dashboard-synthetic.png")
	if !strings.HasSuffix(path, ".png") {
		t.Fatal(path)
	}
}

package metrics

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// scrape GETs /metrics from h and parses it with Prometheus's own text
// parser.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	h.ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// value returns the value of the sample of family name whose labels
// include want (a "k=v,k=v" list), or -1 when there is none. For a
// histogram it returns the sample count.
func value(fams map[string]*dto.MetricFamily, name, want string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		if want != "" {
			for _, kv := range strings.Split(want, ",") {
				k, v, _ := strings.Cut(kv, "=")
				if have[k] != v {
					continue next
				}
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}

func fail(reason validator.Reason, action validator.Action) *validator.Verdict {
	return &validator.Verdict{Verdict: validator.Fail, Risk: validator.RiskMedium, Reason: reason, Action: action}
}

var pass = &validator.Verdict{Verdict: validator.Pass, Action: validator.ActionRelease}

// TestCountersMatchEvents publishes a random mix of request lifecycles on a
// bus, scrapes /metrics, and checks every counter against what the test
// itself counted while sending.
func TestCountersMatchEvents(t *testing.T) {
	var bus events.Bus
	c := New(&bus)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	rng := rand.New(rand.NewPCG(1, 2))
	want := map[string]float64{}
	const n = 300
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("r%d", i)
		up := []string{"llama", "ollama"}[rng.IntN(2)]
		route := "/v1/chat/completions"
		bus.Publish(events.Event{Kind: events.RequestStarted, RequestID: id, Route: route, Upstream: up})
		outcome := "released"
		attempts := 1
		var delay time.Duration // the gateway puts it on RequestFinished
		switch rng.IntN(4) {
		case 0: // released
			bus.Publish(events.Event{Kind: events.AttemptStarted, RequestID: id, Upstream: up, Attempt: 1})
			bus.Publish(events.Event{Kind: events.Verdict, RequestID: id, Upstream: up, Verdict: pass})
			delay = 50 * time.Microsecond
			want["verdicts pass"]++
		case 1: // loop, retried, then passes
			outcome, attempts = "repaired", 2
			bus.Publish(events.Event{Kind: events.AttemptStarted, RequestID: id, Upstream: up, Attempt: 1})
			v := fail(validator.ReasonRepetitionLoop, validator.ActionRetryWithCorrection)
			bus.Publish(events.Event{Kind: events.Verdict, RequestID: id, Upstream: up, Verdict: v})
			bus.Publish(events.Event{Kind: events.Retry, RequestID: id, Upstream: up, Verdict: v})
			bus.Publish(events.Event{Kind: events.AttemptStarted, RequestID: id, Upstream: up, Attempt: 2})
			bus.Publish(events.Event{Kind: events.Verdict, RequestID: id, Upstream: up, Verdict: pass})
			want["verdicts loop"]++
			want["verdicts pass"]++
			want["retries loop"]++
		case 2: // secret leak halts
			outcome = "halted"
			bus.Publish(events.Event{Kind: events.AttemptStarted, RequestID: id, Upstream: up, Attempt: 1})
			v := fail(validator.ReasonSecretLeak, validator.ActionHalt)
			bus.Publish(events.Event{Kind: events.Verdict, RequestID: id, Upstream: up, Verdict: v})
			bus.Publish(events.Event{Kind: events.Halt, RequestID: id, Upstream: up, Verdict: v})
			want["verdicts leak"]++
			want["halts leak"]++
		case 3: // stall halts
			outcome = "halted"
			bus.Publish(events.Event{Kind: events.AttemptStarted, RequestID: id, Upstream: up, Attempt: 1})
			v := fail(validator.ReasonStall, validator.ActionHalt)
			bus.Publish(events.Event{Kind: events.Verdict, RequestID: id, Upstream: up, Verdict: v})
			bus.Publish(events.Event{Kind: events.Halt, RequestID: id, Upstream: up, Verdict: v})
			want["stalls "+up]++
			want["halts stall"]++
		}
		want["attempts "+up] += float64(attempts)
		want["requests "+up+" "+outcome]++
		bus.Publish(events.Event{Kind: events.RequestFinished, RequestID: id, Route: route, Upstream: up, Outcome: outcome,
			Status: 200, TTFT: time.Duration(rng.IntN(100)+1) * time.Millisecond, AddedTTFT: 300 * time.Microsecond,
			Duration: time.Second, HeldBytes: rng.IntN(64), Tokens: 10, VerdictDelay: delay})
	}
	// An unreachable upstream: Halt with no Verdict event before it.
	bus.Publish(events.Event{Kind: events.RequestStarted, RequestID: "down", Route: "/v1/chat/completions", Upstream: "ollama"})
	bus.Publish(events.Event{Kind: events.Halt, RequestID: "down", Upstream: "ollama", Verdict: fail(validator.ReasonUpstreamError, validator.ActionHalt)})
	bus.Publish(events.Event{Kind: events.RequestFinished, RequestID: "down", Route: "/v1/chat/completions", Upstream: "ollama", Outcome: "error", Status: 502})
	bus.Publish(events.Event{Kind: events.GuardStatus, GuardDevice: "Vulkan0", GuardState: "starting"})
	bus.Publish(events.Event{Kind: events.GuardStatus, GuardDevice: "Vulkan0", GuardState: "ready"})
	for i := 0; i < 7; i++ {
		ev := events.Event{Kind: events.Verdict, RequestID: "g", GuardDevice: "Vulkan0", Duration: 20 * time.Millisecond, Verdict: pass}
		if i == 6 {
			ev.Error, ev.GuardState = "connection refused", "fallback"
		}
		bus.Publish(ev)
	}
	if d := bus.Dropped(); d != 0 {
		t.Fatalf("bus dropped %d events; the test would not be exact", d)
	}

	// Every event is in the subscription's buffer: closing it lets Run
	// apply them all and return, so the scrape sees every effect without
	// waiting on the wall clock.
	c.sub.Close()
	<-done
	fams := scrape(t, c.Handler())

	checks := []struct {
		name, metric, labels string
		want                 float64
	}{
		{"released llama", "aegis_requests_total", "upstream=llama,outcome=released", want["requests llama released"]},
		{"repaired ollama", "aegis_requests_total", "upstream=ollama,outcome=repaired", want["requests ollama repaired"]},
		{"halted llama", "aegis_requests_total", "upstream=llama,outcome=halted", want["requests llama halted"]},
		{"halted ollama", "aegis_requests_total", "upstream=ollama,outcome=halted", want["requests ollama halted"]},
		{"in flight back to zero", "aegis_requests_in_flight", "", 0},
		{"attempts llama", "aegis_attempts_total", "upstream=llama", want["attempts llama"]},
		{"attempts ollama", "aegis_attempts_total", "upstream=ollama", want["attempts ollama"]},
		{"pass verdicts", "aegis_verdicts_total", "verdict=pass,reason=none,action=release", want["verdicts pass"]},
		{"loop verdicts", "aegis_verdicts_total", "verdict=fail,reason=repetition_loop,action=retry_with_correction", want["verdicts loop"]},
		{"leak verdicts", "aegis_verdicts_total", "verdict=fail,reason=secret_leak,action=halt", want["verdicts leak"]},
		{"retries", "aegis_retries_total", "reason=repetition_loop,action=retry_with_correction", want["retries loop"]},
		{"halts leak", "aegis_halts_total", "reason=secret_leak", want["halts leak"]},
		{"halts stall", "aegis_halts_total", "reason=stall", want["halts stall"]},
		{"halts never seen are zero", "aegis_halts_total", "reason=invalid_json", 0},
		{"stalls llama", "aegis_upstream_stalls_total", "upstream=llama", want["stalls llama"]},
		{"stalls counted once per attempt", "aegis_upstream_stalls_total", "upstream=ollama", want["stalls ollama"]},
		{"refused upstream", "aegis_upstream_errors_total", "upstream=ollama", 1},
		{"refused request", "aegis_requests_total", "upstream=ollama,outcome=error", 1},
		{"ttft observations", "aegis_time_to_first_token_seconds", "", float64(n) - want["requests ollama released"] - want["requests ollama repaired"] - want["requests ollama halted"]},
		{"verdict delay observations", "aegis_verdict_delay_seconds", "", want["verdicts pass"] - want["retries loop"]},
		{"release lag observations", "aegis_release_lag_bytes", "", n + 1},
		{"tokens", "aegis_completion_tokens_total", "upstream=llama", 10 * (want["requests llama released"] + want["requests llama repaired"] + want["requests llama halted"])},
		{"guard calls", "aegis_guard_calls_total", "device=Vulkan0", 7},
		{"guard latency", "aegis_guard_call_duration_seconds", "device=Vulkan0", 7},
		{"guard failures", "aegis_guard_failures_total", "device=Vulkan0", 1},
		{"guard fallbacks", "aegis_guard_fallbacks_total", "device=Vulkan0", 1},
		{"guard up", "aegis_guard_device_up", "device=Vulkan0", 1},
		{"supervisor current", "aegis_supervisor_state", "child=Vulkan0,state=ready", 1},
		{"supervisor previous", "aegis_supervisor_state", "child=Vulkan0,state=starting", 0},
		{"no drops", "aegis_events_dropped_total", "", 0},
	}
	for _, ck := range checks {
		if ck.name == "ttft observations" {
			// the histogram is per upstream; value() returns the first (llama)
			ck.labels = "upstream=llama"
		}
		if got := value(fams, ck.metric, ck.labels); got != ck.want {
			t.Logf("%v", fams[ck.metric])
			t.Errorf("%s: %s{%s} = %v, want %v", ck.name, ck.metric, ck.labels, got, ck.want)
		}
	}
	if fams["go_goroutines"] == nil || fams["process_open_fds"] == nil {
		t.Error("runtime and process metrics missing")
	}
}

func TestNamesFollowConventions(t *testing.T) {
	c := New(nil)
	c.Observe(events.Event{Kind: events.RequestFinished, Route: "/v1/completions", Upstream: "u", Outcome: "released", TTFT: time.Millisecond, AddedTTFT: time.Microsecond, Duration: time.Second, Tokens: 1, VerdictDelay: time.Microsecond})
	c.Observe(events.Event{Kind: events.Verdict, Verdict: pass})
	c.Observe(events.Event{Kind: events.Verdict, GuardDevice: "CPU", Duration: time.Millisecond})
	for name, f := range scrape(t, c.Handler()) {
		if !strings.HasPrefix(name, "aegis_") {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			if !strings.HasSuffix(name, "_total") {
				t.Errorf("counter %s does not end in _total", name)
			}
		case dto.MetricType_HISTOGRAM:
			if !strings.HasSuffix(name, "_seconds") && !strings.HasSuffix(name, "_bytes") {
				t.Errorf("histogram %s has no unit suffix", name)
			}
		}
		if f.GetHelp() == "" {
			t.Errorf("%s has no help text", name)
		}
	}
}

// TestBlocksAreNotHalts: a blocked input counts in aegis_blocks_total,
// a halt in aegis_halts_total, so each equals its outcome's requests.
func TestBlocksAreNotHalts(t *testing.T) {
	c := New(nil)
	route := "/v1/chat/completions"
	for i, tc := range []struct {
		v       *validator.Verdict
		outcome string
	}{
		{fail(validator.ReasonPromptInjection, validator.ActionBlock), events.OutcomeBlocked},
		{fail(validator.ReasonPromptInjection, validator.ActionBlock), events.OutcomeBlocked},
		{fail(validator.ReasonInvalidJSON, validator.ActionHalt), events.OutcomeHalted},
	} {
		id := fmt.Sprint(i)
		c.Observe(events.Event{Kind: events.RequestStarted, RequestID: id, Route: route, Upstream: "u"})
		c.Observe(events.Event{Kind: events.Halt, RequestID: id, Route: route, Upstream: "u", Verdict: tc.v})
		c.Observe(events.Event{Kind: events.RequestFinished, RequestID: id, Route: route, Upstream: "u", Outcome: tc.outcome})
	}
	fams := scrape(t, c.Handler())
	for _, tc := range []struct {
		name, family, labels string
		want                 float64
	}{
		{"blocks", "aegis_blocks_total", "reason=prompt_injection", 2},
		{"no halt for a block", "aegis_halts_total", "reason=prompt_injection", 0},
		{"halts", "aegis_halts_total", "reason=invalid_json", 1},
		{"blocked requests", "aegis_requests_total", "outcome=blocked", 2},
		{"halted requests", "aegis_requests_total", "outcome=halted", 1},
	} {
		if got := value(fams, tc.family, tc.labels); got != tc.want {
			t.Errorf("%s: %s{%s} = %v, want %v", tc.name, tc.family, tc.labels, got, tc.want)
		}
	}
}

// TestSupervisorGaugeNoStaleSeries: the supervisor reports "starting"
// before any device serves (child none); once a device reports, no series
// stays at 1 for a state the supervisor has left.
func TestSupervisorGaugeNoStaleSeries(t *testing.T) {
	c := New(nil)
	for _, e := range []events.Event{
		{Kind: events.GuardStatus, Upstream: "guard", GuardDevice: "Vulkan0", GuardState: "starting"},
		{Kind: events.GuardStatus, Upstream: "guard", GuardState: "starting"},
		{Kind: events.GuardStatus, Upstream: "guard", GuardDevice: "Vulkan0", GuardState: "ready"},
		{Kind: events.GuardStatus, Upstream: "guard", GuardDevice: "Vulkan0", GuardState: "ready"},
	} {
		c.Observe(e)
	}
	fams := scrape(t, c.Handler())
	for _, m := range fams["aegis_supervisor_state"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if m.Gauge.GetValue() == 1 && labels["state"] != "ready" {
			t.Errorf("stale series at 1: %v", labels)
		}
	}
	if got := value(fams, "aegis_supervisor_state", "child=Vulkan0,state=ready"); got != 1 {
		t.Errorf("current state = %v, want 1", got)
	}
}

// TestToolCalls: each tool call of a verdict is counted by tool and outcome.
func TestToolCalls(t *testing.T) {
	c := New(nil)
	pass := &validator.Verdict{Verdict: validator.Pass, Action: validator.ActionRelease}
	c.Observe(events.Event{Kind: events.Verdict, RequestID: "1", Verdict: pass, ToolCalls: []events.ToolCall{
		{Tool: "send_email", Outcome: events.ToolReleased}, {Tool: "get_weather", Outcome: events.ToolReleased}}})
	c.Observe(events.Event{Kind: events.Verdict, RequestID: "2", Verdict: fail(validator.ReasonSecretLeak, validator.ActionHalt),
		ToolCalls: []events.ToolCall{{Tool: "send_email", Outcome: events.ToolRefused}, {Tool: "undeclared", Outcome: events.ToolDropped}}})
	fams := scrape(t, c.Handler())
	for labels, want := range map[string]float64{
		"outcome=released,tool=send_email": 1, "outcome=refused,tool=send_email": 1,
		"outcome=released,tool=get_weather": 1, "outcome=dropped,tool=undeclared": 1,
	} {
		if got := value(fams, "aegis_tool_calls_total", labels); got != want {
			t.Errorf("aegis_tool_calls_total{%s} = %v, want %v", labels, got, want)
		}
	}
}

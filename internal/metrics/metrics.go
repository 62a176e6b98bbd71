// Package metrics turns the gateway's request events into Prometheus
// metrics and serves them at /metrics.
//
// A Collector subscribes to an events.Bus and keeps its own registry (so
// tests and embedders never collide with the global one). Names follow the
// Prometheus conventions: an aegis_ prefix, base units in the name
// (_seconds, _bytes), _total on counters.
//
// How events map to metrics (the contract the gateway, guard and
// supervisor publish against):
//
//   - RequestStarted / RequestFinished: aegis_requests_in_flight, and on
//     finish aegis_requests_total{route,upstream,outcome},
//     aegis_request_duration_seconds, aegis_time_to_first_token_seconds
//     (TTFT), aegis_added_latency_seconds (AddedTTFT: what Aegis added to
//     the first token), aegis_release_lag_bytes (HeldBytes),
//     aegis_completion_tokens_total (Tokens) and
//     aegis_verdict_delay_seconds (VerdictDelay: the upstream's last token
//     to the request's verdict; the gateway sets it on RequestFinished).
//   - AttemptStarted: aegis_attempts_total{upstream}.
//   - Verdict without GuardDevice: the attempt's verdict:
//     aegis_verdicts_total{verdict,reason,action}; reason upstream_error
//     also counts aegis_upstream_errors_total, reason stall
//     aegis_upstream_stalls_total.
//   - Verdict with GuardDevice: one guard call on that device:
//     aegis_guard_calls_total, aegis_guard_call_duration_seconds
//     (Duration), aegis_guard_failures_total when Error is set or the
//     reason is guard_unavailable, aegis_guard_fallbacks_total when
//     GuardState is "fallback".
//   - Retry / Halt: aegis_retries_total{reason,action}; a Halt whose
//     action is block counts aegis_blocks_total{reason}, any other
//     aegis_halts_total{reason}, so each equals aegis_requests_total of
//     outcome blocked or halted (the outcomes are events.Outcome*).
//   - GuardStatus (published by the guard supervisor with Upstream = the
//     supervisor's name, GuardDevice = the child's device, GuardState =
//     its state): aegis_supervisor_state{supervisor,child,state} is 1 for
//     the child's current state and 0 for the other states it has been in
//     (child "none" when no device serves, as at start-up or in
//     deterministic-only; its series go away once a device reports);
//     aegis_guard_device_up{device} is 1 while the state is ready or
//     fallback (serving); GuardState "fallback" also counts
//     aegis_guard_fallbacks_total.
//   - aegis_events_dropped_total reports events the bus could not deliver
//     to slow subscribers.
package metrics

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Buffer is the number of events a Collector buffers before the bus drops
// events for it.
const Buffer = 4096

// latencyBuckets span 50µs (added latency) to 60s (a long generation).
var latencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
}

// Collector holds Aegis's metrics and updates them from events.
type Collector struct {
	reg *prometheus.Registry
	sub *events.Subscription

	requests      *prometheus.CounterVec
	inFlight      prometheus.Gauge
	attempts      *prometheus.CounterVec
	verdicts      *prometheus.CounterVec
	retries       *prometheus.CounterVec
	halts         *prometheus.CounterVec
	blocks        *prometheus.CounterVec
	ttft          *prometheus.HistogramVec
	added         *prometheus.HistogramVec
	verdictDelay  prometheus.Observer
	duration      *prometheus.HistogramVec
	releaseLag    prometheus.Histogram
	tokens        *prometheus.CounterVec
	guardCalls    *prometheus.CounterVec
	guardLatency  *prometheus.HistogramVec
	guardFailures *prometheus.CounterVec
	guardFallback *prometheus.CounterVec
	guardUp       *prometheus.GaugeVec
	upstreamErrs  *prometheus.CounterVec
	stalls        *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	superState    *prometheus.GaugeVec

	mu      sync.Mutex
	started map[string]time.Time              // requests in flight, by id
	judged  map[string]bool                   // requests in flight that had a Verdict event
	states  map[[2]string]map[string]struct{} // states seen per supervisor and child
}

// New creates a Collector with its own registry (Go runtime and process
// metrics included) and subscribes it to bus. Call Run to consume events;
// Observe applies one event directly.
func New(bus *events.Bus) *Collector {
	c := &Collector{
		reg:     prometheus.NewRegistry(),
		started: map[string]time.Time{},
		judged:  map[string]bool{},
		states:  map[[2]string]map[string]struct{}{},
	}
	f := factory{c.reg}
	c.requests = f.counter("aegis_requests_total", "Requests answered, by route, upstream and outcome (released, repaired, halted, blocked, cancelled, rejected; redacted for MCP tool results).", "route", "upstream", "outcome")
	c.inFlight = f.gauge("aegis_requests_in_flight", "Requests started and not yet finished.")
	c.attempts = f.counter("aegis_attempts_total", "Upstream attempts started (a hidden retry is a second attempt).", "upstream")
	c.verdicts = f.counter("aegis_verdicts_total", "Attempt verdicts, by verdict (pass, fail), reason (none on pass) and action.", "verdict", "reason", "action")
	c.retries = f.counter("aegis_retries_total", "Hidden corrective retries, by reason and action.", "reason", "action")
	c.halts = f.counter("aegis_halts_total", "Requests halted with an error code, by reason (blocked inputs are aegis_blocks_total).", "reason")
	c.blocks = f.counter("aegis_blocks_total", "Requests whose input was refused before generation, by reason.", "reason")
	c.ttft = f.histogram("aegis_time_to_first_token_seconds", "Time from request to the first token the client received.", "upstream")
	c.added = f.histogram("aegis_added_latency_seconds", "Latency Aegis added to the first token, compared with the upstream's own first token.", "upstream")
	c.verdictDelay = f.histogram("aegis_verdict_delay_seconds", "Time from the upstream's last token to the request's verdict.").WithLabelValues()
	c.duration = f.histogram("aegis_request_duration_seconds", "Time from request to the end of the response.", "route", "outcome")
	c.releaseLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "aegis_release_lag_bytes",
		Help:    "Most output bytes held back behind the release point during a request.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 10), // 1 B .. 256 KiB
	})
	c.reg.MustRegister(c.releaseLag)
	c.tokens = f.counter("aegis_completion_tokens_total", "Completion tokens the upstream reported.", "upstream")
	c.guardCalls = f.counter("aegis_guard_calls_total", "Calls to the guard model, by device.", "device")
	c.guardLatency = f.histogram("aegis_guard_call_duration_seconds", "Latency of guard model calls, by device.", "device")
	c.guardFailures = f.counter("aegis_guard_failures_total", "Guard calls that failed (error or unavailable), by device.", "device")
	c.guardFallback = f.counter("aegis_guard_fallbacks_total", "Times the guard fell back away from a device.", "device")
	c.guardUp = f.gaugeVec("aegis_guard_device_up", "1 while the guard on this device is ready, else 0.", "device")
	c.upstreamErrs = f.counter("aegis_upstream_errors_total", "Attempts that ended with an upstream error.", "upstream")
	c.toolCalls = f.counter("aegis_tool_calls_total", "Tool calls the model made, by tool (its declared name, else undeclared) and outcome (released, refused, dropped).", "tool", "outcome")
	c.stalls = f.counter("aegis_upstream_stalls_total", "Attempts stopped because the upstream stalled.", "upstream")
	c.superState = f.gaugeVec("aegis_supervisor_state", "1 for the current state of each supervised child process, 0 for its other states.", "supervisor", "child", "state")
	c.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "aegis_events_dropped_total",
			Help: "Events the bus dropped because a subscriber (metrics, dashboard, incident log) was full.",
		}, func() float64 { return float64(bus.Dropped()) }),
	)
	// Every reason exists from the start, so rate() over halts works
	// before the first one.
	for _, r := range validator.Reasons {
		c.halts.WithLabelValues(string(r))
		c.blocks.WithLabelValues(string(r))
	}
	if bus != nil {
		c.sub = bus.Subscribe(Buffer)
	}
	return c
}

// Registry returns the collector's registry, for adding more metrics.
func (c *Collector) Registry() *prometheus.Registry { return c.reg }

// Handler serves the metrics in the Prometheus exposition formats.
func (c *Collector) Handler() http.Handler {
	return promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{Registry: c.reg})
}

// Run applies events until ctx is done, then unsubscribes.
func (c *Collector) Run(ctx context.Context) {
	if c.sub == nil {
		<-ctx.Done()
		return
	}
	defer c.sub.Close()
	for {
		select {
		case e, ok := <-c.sub.C:
			if !ok {
				return
			}
			c.Observe(e)
		case <-ctx.Done():
			return
		}
	}
}

// Observe updates the metrics for one event.
func (c *Collector) Observe(e events.Event) {
	switch e.Kind {
	case events.RequestStarted:
		c.mu.Lock()
		c.started[e.RequestID] = e.Time
		c.forgetStale(e.Time)
		c.inFlight.Set(float64(len(c.started)))
		c.mu.Unlock()
	case events.AttemptStarted:
		c.attempts.WithLabelValues(e.Upstream).Inc()
	case events.Verdict:
		c.verdict(e)
	case events.Retry:
		reason, action := verdictLabels(e.Verdict)
		c.retries.WithLabelValues(reason, action).Inc()
	case events.Halt:
		reason, action := verdictLabels(e.Verdict)
		if action == string(validator.ActionBlock) {
			c.blocks.WithLabelValues(reason).Inc()
		} else {
			c.halts.WithLabelValues(reason).Inc()
		}
		// An upstream that refused the request ends in a Halt with no
		// Verdict event before it; count that upstream error here.
		c.mu.Lock()
		judged := c.judged[e.RequestID]
		c.mu.Unlock()
		if !judged && e.Verdict != nil {
			c.upstreamTrouble(e.Verdict.Reason, e.Upstream)
		}
	case events.RequestFinished:
		c.finished(e)
	case events.GuardStatus:
		c.guardStatus(e)
	}
}

func (c *Collector) finished(e events.Event) {
	c.mu.Lock()
	delete(c.started, e.RequestID)
	delete(c.judged, e.RequestID)
	c.inFlight.Set(float64(len(c.started)))
	c.mu.Unlock()
	outcome := e.Outcome
	if outcome == "" {
		outcome = "unknown"
	}
	c.requests.WithLabelValues(e.Route, e.Upstream, outcome).Inc()
	if e.Duration > 0 {
		c.duration.WithLabelValues(e.Route, outcome).Observe(e.Duration.Seconds())
	}
	if e.TTFT > 0 {
		c.ttft.WithLabelValues(e.Upstream).Observe(e.TTFT.Seconds())
	}
	if e.AddedTTFT > 0 {
		c.added.WithLabelValues(e.Upstream).Observe(e.AddedTTFT.Seconds())
	}
	c.releaseLag.Observe(float64(e.HeldBytes))
	if e.VerdictDelay > 0 {
		c.verdictDelay.Observe(e.VerdictDelay.Seconds())
	}
	if e.Tokens > 0 {
		c.tokens.WithLabelValues(e.Upstream).Add(float64(e.Tokens))
	}
}

func (c *Collector) verdict(e events.Event) {
	if e.GuardDevice != "" {
		d := e.GuardDevice
		c.guardCalls.WithLabelValues(d).Inc()
		if e.Duration > 0 {
			c.guardLatency.WithLabelValues(d).Observe(e.Duration.Seconds())
		}
		if e.Error != "" || (e.Verdict != nil && e.Verdict.Reason == validator.ReasonGuardUnavailable) {
			c.guardFailures.WithLabelValues(d).Inc()
		}
		if e.GuardState == "fallback" {
			c.guardFallback.WithLabelValues(d).Inc()
		}
		return
	}
	outcome := "pass"
	if e.Verdict != nil && e.Verdict.Verdict == validator.Fail {
		outcome = "fail"
	}
	reason, action := verdictLabels(e.Verdict)
	c.verdicts.WithLabelValues(outcome, reason, action).Inc()
	for _, tc := range e.ToolCalls {
		c.toolCalls.WithLabelValues(tc.Tool, tc.Outcome).Inc()
	}
	if e.Verdict != nil {
		c.mu.Lock()
		c.judged[e.RequestID] = true
		c.mu.Unlock()
		c.upstreamTrouble(e.Verdict.Reason, e.Upstream)
	}
}

func (c *Collector) upstreamTrouble(r validator.Reason, upstream string) {
	switch r {
	case validator.ReasonUpstreamError:
		c.upstreamErrs.WithLabelValues(upstream).Inc()
	case validator.ReasonStall:
		c.stalls.WithLabelValues(upstream).Inc()
	}
}

func (c *Collector) guardStatus(e events.Event) {
	child := e.GuardDevice
	if child == "" {
		child = "none"
	}
	if e.GuardState != "" {
		key := [2]string{e.Upstream, child}
		c.mu.Lock()
		if none := [2]string{e.Upstream, "none"}; child != "none" && c.states[none] != nil {
			// A device reports: the supervisor's no-device series (its
			// start-up, or deterministic-only) is over; drop it rather
			// than leave its last state at 1.
			for s := range c.states[none] {
				c.superState.DeleteLabelValues(e.Upstream, "none", s)
			}
			delete(c.states, none)
		}
		seen := c.states[key]
		if seen == nil {
			seen = map[string]struct{}{}
			c.states[key] = seen
		}
		seen[e.GuardState] = struct{}{}
		for s := range seen {
			v := 0.0
			if s == e.GuardState {
				v = 1
			}
			c.superState.WithLabelValues(e.Upstream, child, s).Set(v)
		}
		c.mu.Unlock()
	}
	if e.GuardDevice != "" {
		up := 0.0
		switch e.GuardState {
		case "ready", "fallback":
			up = 1
		}
		c.guardUp.WithLabelValues(e.GuardDevice).Set(up)
		if e.GuardState == "fallback" {
			c.guardFallback.WithLabelValues(e.GuardDevice).Inc()
		}
	}
}

// forgetStale drops in-flight entries older than an hour: their finish
// event was lost (the bus drops when a subscriber is full), and the gauge
// must not drift up forever. Called with c.mu held.
func (c *Collector) forgetStale(now time.Time) {
	if len(c.started) < 1024 {
		return
	}
	for id, t := range c.started {
		if now.Sub(t) > time.Hour {
			delete(c.started, id)
			delete(c.judged, id)
		}
	}
}

func verdictLabels(v *validator.Verdict) (reason, action string) {
	if v == nil {
		return "none", "release"
	}
	reason, action = string(v.Reason), string(v.Action)
	if reason == "" {
		reason = "none"
	}
	if action == "" {
		action = "release"
	}
	return reason, action
}

// factory registers metrics as it makes them.
type factory struct{ reg *prometheus.Registry }

func (f factory) counter(name, help string, labels ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(v)
	return v
}

func (f factory) gauge(name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	f.reg.MustRegister(g)
	return g
}

func (f factory) gaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	f.reg.MustRegister(v)
	return v
}

func (f factory) histogram(name, help string, labels ...string) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: latencyBuckets}, labels)
	f.reg.MustRegister(v)
	return v
}

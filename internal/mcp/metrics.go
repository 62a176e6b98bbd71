package mcp

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The outcomes of a tools/call in aegis_mcp_calls_total.
const (
	OutcomeAllowed    = "allowed"     // the call and its result passed
	OutcomeRefused    = "refused"     // a check refused the call before the server saw it
	OutcomeRedacted   = "redacted"    // secrets were removed from the result
	OutcomeWithheld   = "withheld"    // the result was replaced by an error result
	OutcomeError      = "error"       // the server answered with an error
	OutcomeTimeout    = "timeout"     // the server did not answer in time
	OutcomeServerGone = "server_gone" // the server exited or closed first
	OutcomeCancelled  = "cancelled"   // the client cancelled the call
)

// Metrics counts MCP traffic for Prometheus. A nil *Metrics counts
// nothing.
type Metrics struct {
	calls *prometheus.CounterVec
	tools *prometheus.CounterVec
}

// NewMetrics registers the MCP counters in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aegis_mcp_calls_total",
			Help: "MCP tools/call requests by server, tool and outcome (allowed, refused, redacted, withheld, error, timeout, server_gone, cancelled)."},
			[]string{"server", "tool", "outcome"}),
		tools: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aegis_mcp_tools_flagged_total",
			Help: "Tools flagged in MCP tool listings by server, tool, kind (poisoned, changed) and action (warn, hide, refuse)."},
			[]string{"server", "tool", "kind", "action"}),
	}
	reg.MustRegister(m.calls, m.tools)
	return m
}

func (m *Metrics) call(server, tool, outcome string) {
	if m == nil {
		return
	}
	m.calls.WithLabelValues(server, tool, outcome).Inc()
}

func (m *Metrics) tool(server, tool string, rep ToolReport) {
	if m == nil {
		return
	}
	kind := "poisoned"
	if rep.Changed {
		kind = "changed"
	}
	m.tools.WithLabelValues(server, tool, kind, rep.Action.String()).Inc()
}

package cli

import (
	"context"
	"log/slog"
	"os"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/aegis-sentinel/aegis/internal/guard/llm"
	"github.com/aegis-sentinel/aegis/internal/tracing"
	"github.com/aegis-sentinel/aegis/internal/upstream"
)

// startTracing starts OpenTelemetry tracing when the OTEL_* environment
// asks for it. The returned provider is nil when tracing is off; stop
// flushes the spans still buffered.
func startTracing(ctx context.Context, service string, log *slog.Logger) (p *tracing.Provider, stop func(), err error) {
	c, err := tracing.FromEnv(os.Getenv)
	if err != nil {
		return nil, func() {}, usageErr(err)
	}
	if p, err = tracing.Setup(ctx, c, service, buildVersion().Version); err != nil {
		return nil, func() {}, err
	}
	if p == nil {
		return nil, func() {}, nil
	}
	llm.Trace = traceGuardCall
	log.Info("tracing: exporting OpenTelemetry traces over OTLP", "protocol", c.Protocol.String())
	return p, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.Shutdown(sctx); err != nil {
			log.Warn("tracing: flushing the last spans failed", "err", err.Error())
		}
		llm.Trace = nil
	}, nil
}

// traceUpstream makes u's calls child spans of the traced request.
func traceUpstream(p *tracing.Provider, u *upstream.Upstream) {
	if p == nil {
		return
	}
	if u.Client == nil {
		u.Client = upstream.NewClient()
	}
	c := *u.Client
	c.Transport = p.Transport(c.Transport, func() string { return genAISystem(u.Kind) })
	u.Client = &c
}

// genAISystem is the gen_ai.system value of an upstream kind.
func genAISystem(k upstream.Kind) string {
	switch k {
	case upstream.KindLlamaServer:
		return "llama.cpp"
	case upstream.KindOllama:
		return "ollama"
	case upstream.KindOpenAI:
		return "openai"
	}
	return ""
}

// traceGuardCall is llm.Trace: a span per guard call, over HTTP to a
// guard server or over NATS to the fleet's workers.
func traceGuardCall(ctx context.Context, j llm.Judgement, c llm.Config) (context.Context, func(*llm.Result, error)) {
	via, target := "http", c.URL
	if c.NATS != "" {
		via, target = "nats", "aegis.guard."+c.Model
	}
	ctx, end := tracing.GuardCall(ctx, j.RequestID, j.Attempt,
		attribute.String("aegis.guard.transport", via), attribute.String("aegis.guard.target", target),
		attribute.String("aegis.guard.task", j.Task), attribute.Bool("aegis.guard.prefill", j.Prefill))
	return ctx, func(r *llm.Result, err error) {
		v := ""
		if r != nil && r.Verdict != nil {
			v = string(r.Verdict.Verdict)
		}
		end(v, err)
	}
}

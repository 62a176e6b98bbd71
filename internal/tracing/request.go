package tracing

import (
	"context"
	"net/http"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

// Attribute keys. The gen_ai.* ones are OpenTelemetry's GenAI semantic
// conventions; the aegis.* ones are the gateway's own.
const (
	KeyOperation    = attribute.Key("gen_ai.operation.name")
	KeySystem       = attribute.Key("gen_ai.system")
	KeyProvider     = attribute.Key("gen_ai.provider.name")
	KeyRequestModel = attribute.Key("gen_ai.request.model")
	KeyOutputTokens = attribute.Key("gen_ai.usage.output_tokens")

	KeyRequestID  = attribute.Key("aegis.request_id")
	KeyRoute      = attribute.Key("aegis.route")
	KeyUpstream   = attribute.Key("aegis.upstream")
	KeyStream     = attribute.Key("aegis.stream")
	KeyAttempt    = attribute.Key("aegis.attempt")
	KeyAttempts   = attribute.Key("aegis.attempts")
	KeyVerdict    = attribute.Key("aegis.verdict")
	KeyReason     = attribute.Key("aegis.reason")
	KeyAction     = attribute.Key("aegis.action")
	KeyRisk       = attribute.Key("aegis.risk")
	KeyGuardrails = attribute.Key("aegis.guardrails")
	KeyFindings   = attribute.Key("aegis.findings")
	KeyOutcome    = attribute.Key("aegis.outcome")
	KeyStatus     = attribute.Key("http.response.status_code")
	KeyText       = attribute.Key("aegis.output.text")
)

// Span names besides the request's.
const (
	SpanAttempt  = "aegis.attempt"
	SpanDecision = "aegis.decision"
	SpanUpstream = "aegis.upstream"
	SpanGuard    = "aegis.guard"
	SpanWorker   = "aegis.guard.worker"
)

type recorderKey struct{}

// recorder holds the spans of one client request.
type recorder struct {
	tracer trace.Tracer
	ctx    context.Context // carries the request span
	span   trace.Span

	mu         sync.Mutex
	id         string
	attempt    trace.Span
	attemptCtx context.Context
	attemptN   int
	system     string
}

// active maps request ids to their recorders, for the guard calls,
// which carry only the id of the response they judge.
var active sync.Map // string -> *recorder

// Handler wraps the gateway's API: each request gets a server span,
// continuing the client's W3C trace context when it sends one. With
// tracing off (nil p) it returns api itself.
func (p *Provider) Handler(api http.Handler) http.Handler {
	if p == nil {
		return api
	}
	prop := w3c
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !traced(r) {
			api.ServeHTTP(w, r)
			return
		}
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := p.tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		rec := &recorder{tracer: p.tracer, ctx: ctx, span: span}
		defer rec.end()
		api.ServeHTTP(w, r.WithContext(context.WithValue(ctx, recorderKey{}, rec)))
	})
}

// traced says which requests get a span: the API, not the health checks.
func traced(r *http.Request) bool {
	switch r.URL.Path {
	case "/", "/health", "/v1/health":
		return false
	}
	return true
}

func (r *recorder) end() {
	r.mu.Lock()
	if r.attempt != nil {
		r.attempt.End()
		r.attempt = nil
	}
	id := r.id
	r.mu.Unlock()
	if id != "" {
		active.CompareAndDelete(id, r)
	}
	r.span.End()
}

// current is the context of the span a call made now belongs to: the
// running attempt's, else the request's.
func (r *recorder) current() context.Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.attemptCtx != nil {
		return r.attemptCtx
	}
	return r.ctx
}

func fromContext(ctx context.Context) *recorder {
	r, _ := ctx.Value(recorderKey{}).(*recorder)
	return r
}

// Note records a lifecycle event of the request whose context is ctx on
// its spans. Without a recorder in ctx (tracing off) it does nothing.
// Text reaches a span only when the event carries it, which it does only
// when the policy sets log_text.
func Note(ctx context.Context, e events.Event) {
	if ctx == nil {
		return
	}
	if r := fromContext(ctx); r != nil {
		r.note(e)
	}
}

func (r *recorder) note(e events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := trace.WithTimestamp(e.Time)
	switch e.Kind {
	case events.RequestStarted:
		r.id = e.RequestID
		active.Store(e.RequestID, r)
		op := operation(e.Route)
		r.span.SetName(op + " " + e.Model)
		r.span.SetAttributes(KeyOperation.String(op), KeyRequestModel.String(e.Model), KeyRequestID.String(e.RequestID),
			KeyRoute.String(e.Route), KeyUpstream.String(e.Upstream), KeyStream.Bool(e.Stream))
	case events.AttemptStarted:
		if r.attempt != nil {
			r.attempt.End(at)
		}
		r.attemptN = e.Attempt
		r.attemptCtx, r.attempt = r.tracer.Start(r.ctx, SpanAttempt, at,
			trace.WithAttributes(KeyAttempt.Int(e.Attempt), KeyUpstream.String(e.Upstream)))
	case events.Verdict:
		parent := r.ctx
		if r.attemptCtx != nil {
			parent = r.attemptCtx
		}
		_, d := r.tracer.Start(parent, SpanDecision, at, trace.WithAttributes(KeyAttempt.Int(e.Attempt)))
		if e.Verdict != nil {
			attrs := verdictAttrs(e.Verdict)
			d.SetAttributes(attrs...)
			if r.attempt != nil {
				r.attempt.SetAttributes(attrs...)
			}
			r.span.SetAttributes(attrs...)
		}
		if e.Text != "" {
			d.SetAttributes(KeyText.String(e.Text))
		}
		d.End(at)
		if r.attempt != nil {
			r.attempt.End(at)
			r.attempt, r.attemptCtx = nil, nil
		}
	case events.Retry:
		r.span.AddEvent("retry", at, trace.WithAttributes(KeyAttempt.Int(e.Attempt), KeyReason.String(reason(e.Verdict))))
	case events.Halt:
		if e.Verdict != nil {
			r.span.SetAttributes(verdictAttrs(e.Verdict)...)
		}
		r.span.AddEvent("halt", at, trace.WithAttributes(KeyReason.String(reason(e.Verdict))))
		r.span.SetStatus(codes.Error, "halted: "+reason(e.Verdict))
	case events.Flag:
		if e.Verdict != nil {
			r.span.SetAttributes(verdictAttrs(e.Verdict)...)
		}
		r.span.AddEvent("flag", at, trace.WithAttributes(KeyReason.String(reason(e.Verdict))))
	case events.RequestFinished:
		r.span.SetAttributes(KeyOutcome.String(e.Outcome), KeyAttempts.Int(max(e.Attempt, r.attemptN)))
		if e.Status != 0 {
			r.span.SetAttributes(KeyStatus.Int(e.Status))
			if e.Status >= 500 {
				r.span.SetStatus(codes.Error, e.Error)
			}
		}
		if e.Tokens > 0 {
			r.span.SetAttributes(KeyOutputTokens.Int(e.Tokens))
		}
		if e.Outcome == events.OutcomeHalted || e.Outcome == events.OutcomeBlocked {
			r.span.SetStatus(codes.Error, e.Outcome)
		}
	}
}

func verdictAttrs(v *validator.Verdict) []attribute.KeyValue {
	attrs := []attribute.KeyValue{KeyVerdict.String(string(v.Verdict)), KeyReason.String(string(v.Reason)),
		KeyAction.String(string(v.Action)), KeyRisk.String(v.Risk.String()), KeyFindings.Int(len(v.Findings))}
	if len(v.Findings) > 0 {
		names := make([]string, 0, len(v.Findings))
		for _, f := range v.Findings {
			if !contains(names, f.Check) {
				names = append(names, f.Check)
			}
		}
		attrs = append(attrs, KeyGuardrails.StringSlice(names))
	}
	return attrs
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

func reason(v *validator.Verdict) string {
	if v == nil {
		return ""
	}
	return string(v.Reason)
}

// operation is the GenAI operation name of a route.
func operation(route string) string {
	switch {
	case strings.HasSuffix(route, "/chat/completions"), route == "/api/chat":
		return "chat"
	case strings.HasSuffix(route, "/completions"), route == "/api/generate":
		return "text_completion"
	case strings.HasSuffix(route, "/embeddings"), route == "/api/embed", route == "/api/embeddings":
		return "embeddings"
	}
	return strings.TrimPrefix(route, "/")
}

package tracing

import (
	"context"
	"io"
	"net/http"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport wraps an upstream's transport: a request made for a traced
// client request gets a client span, a child of the running attempt, and
// carries the W3C trace context (traceparent, tracestate) to the
// upstream. The span lasts until the streamed body is read or closed.
// system names the upstream's GenAI system (gen_ai.system) at call time.
// With tracing off (nil p) it returns base itself.
func (p *Provider) Transport(base http.RoundTripper, system func() string) http.RoundTripper {
	if p == nil {
		return base
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{base: base, system: system, tracer: p.tracer, prop: w3c}
}

type transport struct {
	base   http.RoundTripper
	system func() string
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	rec := fromContext(ctx)
	if rec == nil && !trace.SpanContextFromContext(ctx).IsValid() {
		return t.base.RoundTrip(req)
	}
	parent := ctx
	if rec != nil {
		parent = trace.ContextWithSpan(ctx, trace.SpanFromContext(rec.current()))
	}
	attrs := []attribute.KeyValue{attribute.String("http.request.method", req.Method),
		attribute.String("server.address", req.URL.Hostname()), attribute.String("url.path", req.URL.Path)}
	sys := ""
	if t.system != nil {
		sys = t.system()
	}
	if sys != "" {
		attrs = append(attrs, KeySystem.String(sys), KeyProvider.String(sys))
		if rec != nil {
			rec.setSystem(sys)
		}
	}
	sctx, span := t.tracer.Start(parent, SpanUpstream, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	out := req.Clone(sctx)
	t.prop.Inject(sctx, propagation.HeaderCarrier(out.Header))
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return nil, err
	}
	span.SetAttributes(KeyStatus.Int(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, resp.Status)
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
	return resp, nil
}

func (r *recorder) setSystem(sys string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.system == sys {
		return
	}
	r.system = sys
	r.span.SetAttributes(KeySystem.String(sys), KeyProvider.String(sys))
}

// spanBody ends the upstream span when the body ends.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(func() { b.span.End() })
	}
	return n, err
}

func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.span.End() })
	return err
}

// GuardCall starts the span of one guard call judging attempt of the
// response requestID, a child of that attempt's span (the call carries
// the request's id, not its context). The returned context carries the
// span, so a call sent over NATS carries the trace context to the worker;
// end closes the span with the call's verdict ("" for a prefill) or
// error. A call of a request not traced gets no span.
func GuardCall(ctx context.Context, requestID string, attempt int, attrs ...attribute.KeyValue) (context.Context, func(verdict string, err error)) {
	var parent context.Context
	if v, ok := active.Load(requestID); ok {
		r := v.(*recorder)
		r.mu.Lock()
		parent = r.ctx
		if r.attemptCtx != nil && r.attemptN == attempt {
			parent = r.attemptCtx
		}
		tracer := r.tracer
		r.mu.Unlock()
		parent = trace.ContextWithSpan(ctx, trace.SpanFromContext(parent))
		return guardSpan(tracer, parent, requestID, attempt, attrs)
	}
	if trace.SpanContextFromContext(ctx).IsValid() {
		return guardSpan(Tracer(), ctx, requestID, attempt, attrs)
	}
	return ctx, func(string, error) {}
}

func guardSpan(tr trace.Tracer, parent context.Context, requestID string, attempt int, attrs []attribute.KeyValue) (context.Context, func(string, error)) {
	attrs = append(attrs, KeyRequestID.String(requestID), KeyAttempt.Int(attempt))
	ctx, span := tr.Start(parent, SpanGuard, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return ctx, func(verdict string, err error) {
		if verdict != "" {
			span.SetAttributes(KeyVerdict.String(verdict))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}

// Inject writes ctx's trace context into h, the headers of a message (a
// NATS message's Header has the same shape as HTTP's). It writes nothing
// when ctx carries no span.
func Inject(ctx context.Context, h map[string][]string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	w3c.Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx with the trace context the headers h carry.
func Extract(ctx context.Context, h map[string][]string) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return w3c.Extract(ctx, propagation.HeaderCarrier(h))
}

// WorkerSpan starts the span of a guard worker answering a call whose
// message headers are h: it joins the caller's trace. With tracing off
// in the worker the span is a no-op.
func WorkerSpan(ctx context.Context, h map[string][]string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return Tracer().Start(Extract(ctx, h), SpanWorker, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

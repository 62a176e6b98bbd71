package tracing_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/aegis-sentinel/aegis/internal/checks"
	"github.com/aegis-sentinel/aegis/internal/events"
	"github.com/aegis-sentinel/aegis/internal/gateway"
	"github.com/aegis-sentinel/aegis/internal/policy"
	"github.com/aegis-sentinel/aegis/internal/tracing"
	"github.com/aegis-sentinel/aegis/internal/upstream"
	"github.com/aegis-sentinel/aegis/internal/validator"
)

func TestMain(m *testing.M) {
	checks.RegisterDefault()
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		// The gateway keeps a finished reader goroutine for a second, for the next request.
		goleak.IgnoreTopFunction("github.com/aegis-sentinel/aegis/internal/gateway.readLoop"))
}

// fakeUpstream is a llama-server that streams answers[i] to its i-th
// request (the last one again after them) and keeps the traceparent of
// each request.
type fakeUpstream struct {
	answers [][]string
	n       atomic.Int32
	mu      sync.Mutex
	parents []string
}

func (f *fakeUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body)
	i := int(f.n.Add(1)) - 1
	f.mu.Lock()
	f.parents = append(f.parents, r.Header.Get("Traceparent"))
	f.mu.Unlock()
	words := f.answers[min(i, len(f.answers)-1)]
	w.Header().Set("Content-Type", "text/event-stream")
	for _, word := range words {
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", word)
	}
	fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4,\"total_tokens\":7}}\n\ndata: [DONE]\n\n")
}

// rig is a traced gateway in front of a fake upstream, its spans kept in
// memory.
type rig struct {
	url   string
	up    *fakeUpstream
	spans *tracetest.InMemoryExporter
}

func newRig(t testing.TB, pol *policy.Policy, answers ...[]string) *rig {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	p := tracing.NewProvider(tp)
	f := &fakeUpstream{answers: answers}
	us := httptest.NewServer(f)
	t.Cleanup(us.Close)
	u, err := upstream.New("fake", us.URL, upstream.KindLlamaServer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(u.Client.CloseIdleConnections)
	u.Client.Transport = p.Transport(u.Client.Transport, func() string { return "llama.cpp" })
	g := &gateway.Gateway{Upstreams: []*upstream.Upstream{u}, Policy: pol}
	gs := httptest.NewServer(p.Handler(g))
	t.Cleanup(gs.Close)
	return &rig{url: gs.URL, up: f, spans: exp}
}

const clientParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func (r *rig) ask(t testing.TB) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", clientParent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return string(b)
}

func mustPolicy(t testing.TB, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(doc), "test", validator.Default)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func attr(s tracetest.SpanStub, k attribute.Key) attribute.Value {
	for _, a := range s.Attributes {
		if a.Key == k {
			return a.Value
		}
	}
	return attribute.Value{}
}

func named(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func TestTraceShapes(t *testing.T) {
	cases := []struct {
		name     string
		policy   string
		answers  [][]string
		outcome  string
		attempts int
		verdict  string
	}{
		{"passed", "{}", [][]string{{"a ", "fine ", "answer."}}, events.OutcomeReleased, 1, "pass"},
		{"repaired", "checks: {banned: {terms: [zebra]}}\nactions: {banned_content: {action: retry_with_correction, max_retries: 2}}\nrelease: buffer",
			[][]string{{"a ", "zebra ", "here."}, {"a ", "fine ", "answer."}}, events.OutcomeRepaired, 2, "pass"},
		{"halted", "checks: {banned: {terms: [zebra]}}\nactions: {banned_content: {action: halt, risk: high}}\nrelease: buffer",
			[][]string{{"a ", "zebra ", "here."}}, events.OutcomeHalted, 1, "fail"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, mustPolicy(t, c.policy), c.answers...)
			r.ask(t)
			spans := r.spans.GetSpans()
			reqs := named(spans, "chat m")
			if len(reqs) != 1 {
				t.Fatalf("%d request spans in %v", len(reqs), spanNames(spans))
			}
			rs := reqs[0]
			if got := rs.SpanContext.TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
				t.Errorf("request span trace %s: the client's trace is not continued", got)
			}
			if rs.SpanKind != trace.SpanKindServer {
				t.Errorf("request span kind %v", rs.SpanKind)
			}
			for k, want := range map[attribute.Key]string{tracing.KeyOperation: "chat", tracing.KeyRequestModel: "m",
				tracing.KeySystem: "llama.cpp", tracing.KeyOutcome: c.outcome, tracing.KeyVerdict: c.verdict} {
				if got := attr(rs, k).Emit(); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if got := attr(rs, tracing.KeyAttempts).AsInt64(); got != int64(c.attempts) {
				t.Errorf("attempts %d, want %d", got, c.attempts)
			}
			atts, ups, decs := named(spans, tracing.SpanAttempt), named(spans, tracing.SpanUpstream), named(spans, tracing.SpanDecision)
			if len(atts) != c.attempts || len(ups) != c.attempts || len(decs) != c.attempts {
				t.Fatalf("%d attempt, %d upstream, %d decision spans, want %d each: %v", len(atts), len(ups), len(decs), c.attempts, spanNames(spans))
			}
			for i := range atts {
				if atts[i].Parent.SpanID() != rs.SpanContext.SpanID() {
					t.Errorf("attempt %d is not a child of the request", i+1)
				}
				if !hasChild(atts[i], ups) || !hasChild(atts[i], decs) {
					t.Errorf("attempt %d lacks its upstream or decision span", i+1)
				}
			}
			if c.outcome != events.OutcomeReleased {
				d := decs[0]
				if attr(d, tracing.KeyReason).Emit() != "banned_content" {
					t.Errorf("first decision reason %q", attr(d, tracing.KeyReason).Emit())
				}
				if g := attr(d, tracing.KeyGuardrails).AsStringSlice(); len(g) != 1 || g[0] != "banned" {
					t.Errorf("guardrails %v", g)
				}
			}
			// The upstream got the trace context of its own span.
			r.up.mu.Lock()
			defer r.up.mu.Unlock()
			for i, tp := range r.up.parents {
				if want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + ups[i].SpanContext.SpanID().String() + "-01"; tp != want {
					t.Errorf("upstream call %d traceparent %q, want %q", i+1, tp, want)
				}
			}
			for _, s := range spans {
				for _, a := range s.Attributes {
					if strings.Contains(a.Value.Emit(), "zebra") || strings.Contains(a.Value.Emit(), "fine answer") {
						t.Errorf("span %s carries output text in %s without log_text", s.Name, a.Key)
					}
				}
			}
		})
	}
}

func hasChild(parent tracetest.SpanStub, spans []tracetest.SpanStub) bool {
	for _, s := range spans {
		if s.Parent.SpanID() == parent.SpanContext.SpanID() {
			return true
		}
	}
	return false
}

func spanNames(spans tracetest.SpanStubs) []string {
	var n []string
	for _, s := range spans {
		n = append(n, s.Name)
	}
	return n
}

// TestGuardCallJoinsAttempt: a guard call, which knows only the request
// id and attempt, becomes a child of that attempt's span, and its context
// carries the trace over a message's headers to a worker.
func TestGuardCallJoinsAttempt(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	p := tracing.NewProvider(tp)
	var hdr map[string][]string
	h := p.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tracing.Note(r.Context(), events.Event{Kind: events.RequestStarted, RequestID: "req1", Route: "/api/chat", Model: "m"})
		tracing.Note(r.Context(), events.Event{Kind: events.AttemptStarted, RequestID: "req1", Attempt: 1})
		ctx, end := tracing.GuardCall(context.Background(), "req1", 1, attribute.String("aegis.guard.transport", "nats"))
		hdr = map[string][]string{}
		tracing.Inject(ctx, hdr)
		_, ws := tp.Tracer("worker").Start(tracing.Extract(context.Background(), hdr), "worker")
		ws.End()
		end("pass", nil)
		tracing.Note(r.Context(), events.Event{Kind: events.Verdict, RequestID: "req1", Attempt: 1, Verdict: &validator.Verdict{Verdict: validator.Pass}})
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/chat", nil))
	spans := exp.GetSpans()
	att, guard, worker := named(spans, tracing.SpanAttempt), named(spans, tracing.SpanGuard), named(spans, "worker")
	if len(att) != 1 || len(guard) != 1 || len(worker) != 1 {
		t.Fatalf("spans %v", spanNames(spans))
	}
	if guard[0].Parent.SpanID() != att[0].SpanContext.SpanID() {
		t.Error("the guard call is not a child of its attempt")
	}
	if worker[0].Parent.SpanID() != guard[0].SpanContext.SpanID() || worker[0].SpanContext.TraceID() != att[0].SpanContext.TraceID() {
		t.Error("the worker did not join the trace through the headers")
	}
	if len(hdr["Traceparent"]) != 1 {
		t.Errorf("headers %v", hdr)
	}
	if named(spans, "chat m") == nil {
		t.Errorf("request span not named for the GenAI operation: %v", spanNames(spans))
	}
	// After the request, its id no longer finds a parent.
	if _, end := tracing.GuardCall(context.Background(), "req1", 1); end != nil {
		end("", nil)
	}
	if n := len(exp.GetSpans()); n != len(spans) {
		t.Errorf("a guard call after the request made a span (%d spans, were %d)", n, len(spans))
	}
}

func TestFromEnv(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		enabled bool
		proto   tracing.Protocol
		err     string
	}{
		{"nothing set", nil, false, tracing.ProtocolHTTP, ""},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true, tracing.ProtocolHTTP, ""},
		{"traces endpoint grpc", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, tracing.ProtocolGRPC, ""},
		{"traces protocol wins", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, true, tracing.ProtocolHTTP, ""},
		{"exporter none", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h"}, false, tracing.ProtocolHTTP, ""},
		{"sdk disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h"}, false, tracing.ProtocolHTTP, ""},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, tracing.ProtocolHTTP, `OTEL_TRACES_EXPORTER="zipkin"`},
		{"http/json", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h", "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, true, tracing.ProtocolHTTP, `OTEL_EXPORTER_OTLP_PROTOCOL="http/json"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := tracing.FromEnv(func(k string) string { return c.env[k] })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || got.Enabled != c.enabled || got.Protocol != c.proto {
				t.Fatalf("got %+v, %v", got, err)
			}
		})
	}
}

// TestOffWrapsNothing: with tracing off the handler and the transport are
// the ones given, and Note costs no allocation.
func TestOffWrapsNothing(t *testing.T) {
	var p *tracing.Provider
	h := http.NotFoundHandler()
	if got := p.Handler(h); fmt.Sprintf("%p", got) != fmt.Sprintf("%p", h) {
		t.Error("Handler wrapped the API with tracing off")
	}
	rt := http.DefaultTransport
	if p.Transport(rt, nil) != rt {
		t.Error("Transport wrapped with tracing off")
	}
	ctx := context.WithValue(context.Background(), struct{}{}, 1)
	e := events.Event{Kind: events.Verdict, RequestID: "x", Verdict: &validator.Verdict{}}
	if n := testing.AllocsPerRun(1000, func() { tracing.Note(ctx, e) }); n != 0 {
		t.Errorf("Note allocates %v times per event with tracing off", n)
	}
	if n := testing.AllocsPerRun(1000, func() { tracing.Inject(ctx, map[string][]string(nil)) }); n != 0 {
		t.Errorf("Inject allocates %v times with tracing off", n)
	}
}

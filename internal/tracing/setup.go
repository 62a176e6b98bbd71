// Package tracing exports OpenTelemetry traces of the gateway's requests:
// one span per client request (with the GenAI semantic conventions), a
// child span per attempt, per upstream call, per guard call and per
// decision. It is configured by the standard OTEL_* environment variables
// and is off unless they ask for it; when off, nothing is wrapped and the
// hooks the gateway calls return at once.
//
// The gateway calls Note with each lifecycle event; Provider.Handler puts
// the request's recorder in the request context, Provider.Transport
// makes the upstream calls child spans carrying W3C trace context, and
// GuardCall makes a guard call (which carries only the request id) a
// child of its attempt.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Protocol is the OTLP transport.
type Protocol int

// The OTLP transports of the specification's
// OTEL_EXPORTER_OTLP_PROTOCOL values.
const (
	ProtocolHTTP Protocol = iota // http/protobuf, the specification's default
	ProtocolGRPC                 // grpc
)

func (p Protocol) String() string {
	if p == ProtocolGRPC {
		return "grpc"
	}
	return "http/protobuf"
}

// Config is what the environment asks of tracing.
type Config struct {
	// Enabled is true when an OTLP endpoint is configured (or
	// OTEL_TRACES_EXPORTER=otlp) and neither OTEL_SDK_DISABLED=true nor
	// OTEL_TRACES_EXPORTER=none turns it off.
	Enabled  bool
	Protocol Protocol
}

// FromEnv reads the tracing configuration from the OTEL_* variables
// getenv returns. Tracing is on when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set or OTEL_TRACES_EXPORTER is
// otlp; OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true turn it off.
// The exporters read the endpoint, headers, timeout and TLS settings
// themselves; the SDK reads OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
// and OTEL_TRACES_SAMPLER(_ARG).
func FromEnv(getenv func(string) string) (Config, error) {
	var c Config
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return c, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "none":
		return c, nil
	case "otlp":
		c.Enabled = true
	case "":
		c.Enabled = getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	default:
		return c, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: Aegis exports traces over otlp only (or none)", exp)
	}
	proto := strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
	if proto == "" {
		proto = strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	switch proto {
	case "", "http/protobuf":
		c.Protocol = ProtocolHTTP
	case "grpc":
		c.Protocol = ProtocolGRPC
	default:
		return c, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%q: want grpc or http/protobuf", proto)
	}
	return c, nil
}

// Provider is the running tracer provider. A nil *Provider is tracing
// off: its methods wrap nothing.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
}

// w3c carries trace context the W3C way (traceparent, tracestate and
// baggage), over HTTP to upstreams and over NATS to guard workers.
var w3c propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// instrumentation is the tracer's name.
const instrumentation = "github.com/aegis-sentinel/aegis"

// Setup starts tracing as c says, for the service named service (unless
// OTEL_SERVICE_NAME names it), and installs the provider and the W3C
// propagators as OpenTelemetry's globals. It returns nil when c is not
// enabled.
func Setup(ctx context.Context, c Config, service, version string) (*Provider, error) {
	if !c.Enabled {
		return nil, nil
	}
	var (
		exp sdktrace.SpanExporter
		err error
	)
	switch c.Protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx)
	default:
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP %s exporter: %w", c.Protocol, err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win
		resource.WithTelemetrySDK(), resource.WithHost(), resource.WithProcessPID())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(w3c)
	return &Provider{tp: tp, tracer: tp.Tracer(instrumentation)}, nil
}

// Shutdown sends the spans still buffered and stops the exporter.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// Tracer returns the global tracer of the package (a no-op one until
// Setup installed a provider).
func Tracer() trace.Tracer { return otel.Tracer(instrumentation) }

// NewProvider wraps a tracer provider made elsewhere (tests and
// benchmarks record spans in memory with one).
func NewProvider(tp *sdktrace.TracerProvider) *Provider {
	return &Provider{tp: tp, tracer: tp.Tracer(instrumentation)}
}

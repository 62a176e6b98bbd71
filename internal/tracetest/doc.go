// Package tracetest runs the gateway and a guard worker against the
// testbed's llama-server, NATS and Jaeger with tracing on, and reads the
// traces back through Jaeger's query API. It has only tests.
package tracetest

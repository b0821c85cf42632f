package tracing

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// Tracer is floodgate's tracer; a no-op until Setup installs an exporter.
func Tracer() trace.Tracer { return otel.Tracer("github.com/floodgate/floodgate") }

// enabled is set once Setup installs an exporter. Until then Start skips
// OpenTelemetry altogether: its global no-op tracer still looks itself up
// and builds a span on every call, 5% of a node's CPU on the Allow path.
var enabled atomic.Bool

// noSpan is what Start returns with tracing off: a span that records
// nothing and is never anyone's parent.
var noSpan = trace.SpanFromContext(context.Background())

// Enabled reports whether spans are recorded (Setup installed an exporter).
func Enabled() bool { return enabled.Load() }

// Config says where spans go.
type Config struct {
	// Endpoint is the OTLP/gRPC collector (host:port). Empty: the
	// standard OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT variables, and with
	// none of them tracing is off.
	Endpoint string
	// Insecure sends without TLS (a collector on loopback or a sidecar).
	Insecure bool
	// SampleRatio is the share of traces started here that are kept
	// (0..1); a trace started by a caller follows the caller's choice.
	SampleRatio float64
	// NodeID names the node in every span (service.instance.id).
	NodeID string
}

// Enabled reports whether c turns tracing on.
func (c Config) Enabled() bool {
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the exporter and returns what to flush and stop it with
// at shutdown, and the gRPC options that carry traces through the node's
// server and its calls to peers. When tracing is off it changes nothing.
func Setup(ctx context.Context, c Config) (shutdown func(context.Context) error, server []grpc.ServerOption, client []grpc.DialOption, err error) {
	if !c.Enabled() {
		return func(context.Context) error { return nil }, nil, nil, nil
	}
	if c.SampleRatio < 0 || c.SampleRatio > 1 {
		return nil, nil, nil, fmt.Errorf("trace sample ratio: must be between 0 and 1, got %v", c.SampleRatio)
	}
	var opts []otlptracegrpc.Option
	if c.Endpoint != "" {
		opts = append(opts, otlptracegrpc.WithEndpoint(c.Endpoint))
	}
	if c.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("otlp exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(c.SampleRatio))),
		sdktrace.WithResource(resource(c.NodeID)),
	)
	otel.SetTracerProvider(tp)
	enabled.Store(true)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp.Shutdown,
		[]grpc.ServerOption{grpc.StatsHandler(otelgrpc.NewServerHandler())},
		[]grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler())},
		nil
}

// Start begins a span of floodgate's tracer; with tracing off it returns
// ctx unchanged and a span that records nothing. The span keeps a copy of
// attrs, so that attrs itself does not escape: a caller's arguments then
// stay on its stack, and a check costs no allocation for a span that
// tracing off never records.
func Start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if !enabled.Load() {
		return ctx, noSpan
	}
	return Tracer().Start(ctx, name, trace.WithAttributes(slices.Clone(attrs)...))
}

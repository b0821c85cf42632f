package tracing

import (
	"context"
	"testing"
)

func TestOffWithoutAnEndpoint(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	shutdown, srv, cli, err := Setup(context.Background(), Config{SampleRatio: 1})
	if err != nil || len(srv) != 0 || len(cli) != 0 {
		t.Fatalf("tracing off: %v %v %v", srv, cli, err)
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Spans are no-ops: nothing recorded, nothing sampled.
	_, span := Start(context.Background(), "x")
	if span.SpanContext().IsSampled() {
		t.Error("a span was sampled with tracing off")
	}
	span.End()
}

func TestStartIsFreeWhileOff(t *testing.T) {
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, 1)
	got, span := Start(ctx, "x")
	if got != ctx {
		t.Error("Start changed the context with tracing off")
	}
	if span.IsRecording() {
		t.Error("a span records with tracing off")
	}
	if n := testing.AllocsPerRun(100, func() { _, s := Start(ctx, "x"); s.End() }); n != 0 {
		t.Errorf("Start allocates %v times per call with tracing off", n)
	}
}

func TestEnabledByFlagOrEnvironment(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	if (Config{}).Enabled() {
		t.Fatal("enabled with nothing configured")
	}
	if !(Config{Endpoint: "127.0.0.1:4317"}).Enabled() {
		t.Fatal("an endpoint does not enable tracing")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector:4317")
	if !(Config{}).Enabled() {
		t.Fatal("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT does not enable tracing")
	}
}

func TestRefusesABadRatio(t *testing.T) {
	if _, _, _, err := Setup(context.Background(), Config{Endpoint: "127.0.0.1:4317", SampleRatio: 2}); err == nil {
		t.Fatal("a sample ratio of 2 was accepted")
	}
}

package tracing

import (
	"context"
	"reflect"
	"testing"

	"github.com/backstop-llm/backstop/observe"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// TestUnset checks the word comparison against the interfaces' own ==:
// the unset globals are unset, anything installed in their place is not,
// and a provider of the same type as the unset one but another pointer is
// not either.
func TestUnset(t *testing.T) {
	if !unset(otel.GetTracerProvider(), otel.GetMeterProvider()) {
		t.Fatal("the globals as the API leaves them are not unset")
	}
	tp, mp := sdktrace.NewTracerProvider(), sdkmetric.NewMeterProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	if unset(tp, unsetMeterProvider) || unset(unsetTracerProvider, mp) || unset(tp, mp) {
		t.Fatal("an installed provider reads as unset")
	}
	if unset(tracenoop.NewTracerProvider(), unsetMeterProvider) {
		t.Fatal("a no-op provider (a value, not the unset pointer) reads as unset")
	}
	other := reflect.New(reflect.TypeOf(unsetTracerProvider).Elem()).Interface().(trace.TracerProvider)
	if unset(other, unsetMeterProvider) {
		t.Fatal("another provider of the unset one's type reads as unset")
	}
}

// TestStartCallFollowsTheGlobals checks that a chain's telemetry, built
// before any SDK, records once one is installed and stops when the no-op
// providers replace it.
func TestStartCallFollowsTheGlobals(t *testing.T) {
	defer otel.SetTracerProvider(otel.GetTracerProvider())
	o, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, c := o.StartCall(context.Background(), observe.CallStart{Chain: "c"}); c != nil {
		t.Fatal("observed a call with nothing installed")
	}
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	otel.SetTracerProvider(tp)
	if _, c := o.StartCall(context.Background(), observe.CallStart{Chain: "c"}); c == nil {
		t.Fatal("did not observe a call once an SDK was installed")
	}
	otel.SetTracerProvider(tracenoop.NewTracerProvider())
	if _, c := o.StartCall(context.Background(), observe.CallStart{Chain: "c"}); c != nil {
		t.Fatal("observed a call with the no-op provider installed")
	}
}

// TestOneProviderGivenTheOtherFollowsTheGlobal (after TestUnset, which needs
// the globals unset): a nil MeterProvider means
// the global, read on every call, also when the TracerProvider is given:
// metrics are recorded once an SDK is installed as the global.
func TestOneProviderGivenTheOtherFollowsTheGlobal(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	o, err := New(Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	otel.SetMeterProvider(mp)
	defer otel.SetMeterProvider(metricnoop.NewMeterProvider())
	o.Event(observe.BreakerChange{Target: observe.Target{Name: "t"}, To: "open"})
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			found = found || m.Name == metricBreakerChanges
		}
	}
	if !found {
		t.Fatal("the global MeterProvider recorded nothing: a nil MeterProvider was not the global")
	}
}

// BenchmarkStartCallUnset is what every call pays for telemetry that is on
// by default when no SDK is installed: asking the globals.
func BenchmarkStartCallUnset(b *testing.B) {
	o, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, c := o.StartCall(ctx, observe.CallStart{Chain: "c"}); c != nil {
			b.Fatal("observed")
		}
	}
}

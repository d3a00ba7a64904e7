// Package oteltest records telemetry in memory for tests: spans exported
// synchronously and metrics read on demand, so that no goroutine outlives a
// test and a test reads exactly what its calls recorded.
package oteltest

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Telemetry is a tracer provider and a meter provider recording in memory.
// Pass TracerProvider and MeterProvider to what is tested; read Spans and
// Metrics.
type Telemetry struct {
	Spans          *tracetest.InMemoryExporter
	TracerProvider *sdktrace.TracerProvider
	MeterProvider  *sdkmetric.MeterProvider
	reader         *sdkmetric.ManualReader
}

// New returns empty telemetry.
func New() *Telemetry {
	t := &Telemetry{Spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	t.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSyncer(t.Spans))
	t.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(t.reader))
	return t
}

// Collect returns every metric recorded so far.
func (tel *Telemetry) Collect(t testing.TB) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := tel.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// Metrics returns every metric recorded so far, by name.
func (tel *Telemetry) Metrics(t testing.TB) map[string]metricdata.Aggregation {
	t.Helper()
	out := map[string]metricdata.Aggregation{}
	rm := tel.Collect(t)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// Counter returns the total of the int64 counter named name, over all its
// attributes; 0 when nothing was counted.
func (tel *Telemetry) Counter(t testing.TB, name string) int64 {
	t.Helper()
	var n int64
	if s, ok := tel.Metrics(t)[name].(metricdata.Sum[int64]); ok {
		for _, p := range s.DataPoints {
			n += p.Value
		}
	}
	return n
}

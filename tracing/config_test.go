package tracing

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/internal/problems"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TestValidate: a provider that is a typed nil (a *sdktrace.TracerProvider
// never built) is refused, naming the field, instead of panicking on the
// first use; nil and real providers pass.
func TestValidate(t *testing.T) {
	var tp *sdktrace.TracerProvider
	var mp *sdkmetric.MeterProvider
	err := Config{TracerProvider: tp, MeterProvider: mp}.Validate()
	if !errors.Is(err, problems.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), "tracing: invalid configuration: Config.TracerProvider is a nil *trace.TracerProvider") ||
		!strings.Contains(err.Error(), "tracing: invalid configuration: Config.MeterProvider is a nil *metric.MeterProvider") {
		t.Fatalf("Validate() = %v; want both providers named, under the sentinel", err)
	}
	if _, nerr := New(Config{TracerProvider: tp}); !errors.Is(nerr, problems.ErrInvalidConfig) {
		t.Fatalf("New = %v; want Validate's error", nerr)
	}
	real := sdktrace.NewTracerProvider()
	defer func() { _ = real.Shutdown(context.Background()) }()
	for _, c := range []Config{{}, {TracerProvider: real, CaptureContent: true}, {MeterProvider: metricnoop.NewMeterProvider()}} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
	}
}

// failingMeter makes no counters.
type failingMeter struct{ metricnoop.Meter }

func (failingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errors.New("no counters here")
}

type failingMeterProvider struct{ metricnoop.MeterProvider }

func (failingMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return failingMeter{} }

// TestNewFailingProvider: a MeterProvider that cannot make the instruments
// fails New with an error matching the invalid-configuration sentinel,
// saying which provider and why.
func TestNewFailingProvider(t *testing.T) {
	_, err := New(Config{MeterProvider: failingMeterProvider{}})
	if !errors.Is(err, problems.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.MeterProvider") ||
		!strings.Contains(err.Error(), "no counters here") {
		t.Fatalf("New = %v", err)
	}
}

package bench

// The healthy path with tracing: through a sampled SDK TracerProvider,
// the no-op provider, and the unset global default; and, as the baseline,
// the bare cost of starting and ending two spans (a parent and a child, as
// a one-attempt call makes) on each provider.

import (
	"context"
	"testing"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// discard is a span processor that drops ended spans, so the SDK does all
// its work (sampling, recording, ending) and nothing else is measured.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

func sdkProvider() *sdktrace.TracerProvider {
	return sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(discard{}))
}

func tracedChain(tb testing.TB, tp trace.TracerProvider) *chain.Chain {
	b := chain.New("bench").
		Primary(chain.Target{Name: "sonnet", Provider: provider, Model: "claude-sonnet-5-5"}).
		OrDegrade(degrade.Static(static))
	if tp != nil {
		b.TracerProvider(tp)
	}
	c, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// benchTracer is tp's tracer for the bare spans, tp nil meaning the unset
// global, as it does for a chain.
func benchTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer("bench")
}

func BenchmarkTracing(b *testing.B) {
	ctx := context.Background()
	for _, p := range []struct {
		name string
		tp   trace.TracerProvider // nil: the unset global
	}{{"sdk", sdkProvider()}, {"noop", noop.NewTracerProvider()}, {"global", nil}} {
		b.Run("backstop/"+p.name, func(b *testing.B) { calls(b, tracedChain(b, p.tp)) })
		b.Run("twospans/"+p.name, func(b *testing.B) {
			tr := benchTracer(p.tp)
			b.ReportAllocs()
			for b.Loop() {
				cctx, call := tr.Start(ctx, "backstop.call bench", trace.WithSpanKind(trace.SpanKindInternal))
				_, attempt := tr.Start(cctx, "chat claude-sonnet-5-5", trace.WithSpanKind(trace.SpanKindClient))
				attempt.End()
				call.End()
			}
		})
		// The same two spans carrying the attributes backstop records on a
		// healthy call, set with the OTel API directly: the least it can
		// cost to record that information.
		b.Run("twospans+attrs/"+p.name, func(b *testing.B) {
			tr := benchTracer(p.tp)
			b.ReportAllocs()
			for b.Loop() {
				cctx, call := tr.Start(ctx, "backstop.call bench", trace.WithSpanKind(trace.SpanKindInternal),
					trace.WithAttributes(attribute.String("backstop.chain", "bench")))
				_, attempt := tr.Start(cctx, "chat claude-sonnet-5-5", trace.WithSpanKind(trace.SpanKindClient),
					trace.WithAttributes(
						attribute.String("gen_ai.operation.name", "chat"), attribute.String("gen_ai.provider.name", "anthropic"),
						attribute.String("gen_ai.request.model", "claude-sonnet-5-5"), attribute.String("backstop.target", "sonnet"),
						attribute.String("backstop.tier", "primary"), attribute.Int("backstop.attempt", 1)))
				attempt.SetAttributes(
					attribute.Int("http.response.status_code", 200), attribute.String("backstop.request_id", "req_1"),
					attribute.String("gen_ai.response.model", "claude-sonnet-5-5"), attribute.String("gen_ai.response.id", "msg_1"),
					attribute.Int("gen_ai.usage.input_tokens", 10), attribute.Int("gen_ai.usage.output_tokens", 2),
					attribute.StringSlice("gen_ai.response.finish_reasons", []string{"end_turn"}))
				attempt.End()
				call.SetAttributes(
					attribute.Int("backstop.attempts", 1), attribute.Int("backstop.fallbacks", 0), attribute.Bool("backstop.degraded", false),
					attribute.String("backstop.served.target", "sonnet"), attribute.String("backstop.served.tier", "primary"),
					attribute.String("gen_ai.response.model", "claude-sonnet-5-5"), attribute.String("backstop.served.request_id", "req_1"),
					attribute.String("backstop.request_id", "req_1"))
				call.End()
			}
		})
	}
}

// TestTracedChainAnswers checks that the traced benchmarks measure real
// calls.
func TestTracedChainAnswers(t *testing.T) {
	for _, tp := range []trace.TracerProvider{sdkProvider(), noop.NewTracerProvider(), nil} {
		res, err := tracedChain(t, tp).Call(context.Background(), llm.Request{Messages: request.Messages})
		if err != nil || res.Text != "ok" {
			t.Fatalf("%v %+v", err, res)
		}
	}
}

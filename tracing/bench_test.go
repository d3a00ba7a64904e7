package tracing

import (
	"context"
	"testing"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/oteltest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
)

// BenchmarkHealthyCallRecorded is one healthy call recorded in traces and
// metrics, with a budget key: what the instrumentation costs a call.
func BenchmarkHealthyCallRecorded(b *testing.B) {
	tel := oteltest.New()
	o, _ := New(Config{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider})
	_ = o.Bind("support", costTargets)
	resp := &llm.Response{Usage: llm.Usage{InputTokens: 1000, OutputTokens: 100}}
	k := cost.Cost{Spent: cost.Dollars(0.0045)}
	ctx := cost.WithKey(context.Background(), "tenant-7")
	b.ReportAllocs()
	for b.Loop() {
		cctx, c := o.StartCall(ctx, observe.CallStart{Chain: "support"})
		_, a := c.StartAttempt(cctx, observe.AttemptStart{Target: costTargets[0], N: 1})
		a.End(observe.AttemptEnd{Target: costTargets[0], N: 1, Response: resp, Status: 200, Cost: k})
		s := costTargets[0]
		c.End(observe.CallEnd{Served: &s, Outcome: "served", Attempts: 1, Cost: k})
	}
}

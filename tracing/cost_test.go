package tracing

import (
	"context"
	"errors"
	"testing"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/oteltest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// costTargets are a chain's primary, sibling and degradation.
var costTargets = []observe.Target{
	{Name: "sonnet", Tier: "primary", Provider: "anthropic", Model: "claude-sonnet-4-5", Index: 0},
	{Name: "mystery", Tier: "sibling", Provider: "openai", Model: "unknown-model", Index: 1},
	{Name: "static", Tier: "degrade", Index: 2},
}

// attempt ends one attempt of call on target i with e.
func endAttempt(ctx context.Context, c observe.Call, i, n int, e observe.AttemptEnd) {
	_, a := c.StartAttempt(ctx, observe.AttemptStart{Target: costTargets[i], N: n})
	e.Target, e.N = costTargets[i], n
	a.End(e)
}

func spanAttrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// point returns the value of the point of a sum whose attributes are
// exactly want, and whether there is one.
func point[N int64 | float64](t *testing.T, data metricdata.Aggregation, want ...attribute.KeyValue) (N, bool) {
	t.Helper()
	s, ok := data.(metricdata.Sum[N])
	if !ok {
		t.Fatalf("not a sum of %T: %T", N(0), data)
	}
	set := attribute.NewSet(want...)
	for _, p := range s.DataPoints {
		if p.Attributes.Equals(&set) {
			return p.Value, true
		}
	}
	return 0, false
}

// TestCostOnSpansAndMetrics: each attempt span carries what the attempt
// cost (backstop.cost, dollars) with its flags, an unpriced cost never
// reading as 0; the call span carries the total and the overhead (all
// but the served attempt) and the caller's budget key; the cost counter
// adds what the known prices account for by target and budget key, and
// the unpriced attempts are counted apart.
func TestCostOnSpansAndMetrics(t *testing.T) {
	tel := oteltest.New()
	o, err := New(Config{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Bind("support", costTargets); err != nil {
		t.Fatal(err)
	}
	invalid := cost.Cost{Spent: cost.Dollars(0.0030)}                                // an answer that failed its schema: billed
	lost := cost.Cost{Unpriced: true, Estimated: true}                               // a hedge that lost, on a model of no known price
	served := cost.Cost{Spent: cost.Dollars(0.0005), Unpriced: true}                 // priced in part
	total := invalid.Add(cost.Cost{}).Add(lost).Add(served).Add(cost.Cost{Spent: 0}) // as Result.Cost adds them
	ctx, c := o.StartCall(cost.WithKey(context.Background(), "tenant-7"), observe.CallStart{Chain: "support"})
	endAttempt(ctx, c, 0, 1, observe.AttemptEnd{Response: &llm.Response{}, Status: 200, Kind: llm.KindInvalidOutput, Err: errors.New("invalid"), Cost: invalid})
	endAttempt(ctx, c, 0, 2, observe.AttemptEnd{Status: 529, Kind: llm.KindOverloaded, Err: errors.New("overloaded")})
	endAttempt(ctx, c, 1, 1, observe.AttemptEnd{Kind: llm.KindCanceled, Err: errors.New("lost"), Lost: true, Cost: lost})
	endAttempt(ctx, c, 1, 2, observe.AttemptEnd{Response: &llm.Response{}, Status: 200, Cost: served})
	s := costTargets[1]
	c.End(observe.CallEnd{Served: &s, Outcome: "served", Attempts: 4, Cost: total})

	spans := tel.Spans.GetSpans()
	if len(spans) != 5 {
		t.Fatalf("%d spans, want 5", len(spans))
	}
	for i, want := range []struct {
		cost                float64
		hasCost             bool
		unpriced, estimated bool
	}{
		{0.003, true, false, false},
		{0, true, false, false}, // not billed: known to be 0
		{0, false, true, true},  // nothing priced: no figure at all
		{0.0005, true, true, false},
	} {
		a := spanAttrs(spans[i].Attributes)
		v, ok := a[keyCost]
		if ok != want.hasCost || ok && v.AsFloat64() != want.cost {
			t.Errorf("attempt %d: backstop.cost %v (present %v), want %v (present %v)", i, v.AsFloat64(), ok, want.cost, want.hasCost)
		}
		if a[keyCostUnpriced].AsBool() != want.unpriced || a[keyCostEstimated].AsBool() != want.estimated {
			t.Errorf("attempt %d: unpriced %v estimated %v, want %v %v", i, a[keyCostUnpriced].AsBool(), a[keyCostEstimated].AsBool(), want.unpriced, want.estimated)
		}
	}
	ca := spanAttrs(spans[4].Attributes)
	if ca[keyCost].AsFloat64() != 0.0035 || ca[keyCostOverhead].AsFloat64() != 0.003 || !ca[keyCostUnpriced].AsBool() ||
		!ca[keyCostEstimated].AsBool() || ca[keyBudgetKey].AsString() != "tenant-7" {
		t.Errorf("call span: cost %v overhead %v unpriced %v estimated %v key %q, want 0.0035, 0.003, true, true, tenant-7",
			ca[keyCost].AsFloat64(), ca[keyCostOverhead].AsFloat64(), ca[keyCostUnpriced].AsBool(), ca[keyCostEstimated].AsBool(), ca[keyBudgetKey].AsString())
	}

	m := tel.Metrics(t)
	key := keyBudgetKey.String("tenant-7")
	if v, _ := point[float64](t, m[metricCost], keyChain.String("support"), keyTarget.String("sonnet"), keyTier.String("primary"), key); v != 0.003 {
		t.Errorf("cost of sonnet for tenant-7: %v, want 0.003", v)
	}
	if v, _ := point[float64](t, m[metricCost], keyChain.String("support"), keyTarget.String("mystery"), keyTier.String("sibling"), key); v != 0.0005 {
		t.Errorf("cost of mystery for tenant-7: %v, want 0.0005 (the known part)", v)
	}
	if v, ok := point[int64](t, m[metricUnpriced], keyChain.String("support"), keyTarget.String("mystery"), keyTier.String("sibling"), key); v != 2 {
		t.Errorf("unpriced attempts on mystery: %v (present %v), want 2", v, ok)
	}
	if _, ok := point[int64](t, m[metricUnpriced], keyChain.String("support"), keyTarget.String("sonnet"), keyTier.String("primary"), key); ok {
		t.Error("sonnet's priced attempts counted as unpriced")
	}
}

// TestCostOfACallNothingServed: a degraded call's model attempts are all
// overhead; a degradation's span carries no cost, and a call without a
// budget key records none.
func TestCostOfACallNothingServed(t *testing.T) {
	tel := oteltest.New()
	o, err := New(Config{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Bind("support", costTargets); err != nil {
		t.Fatal(err)
	}
	billed := cost.Cost{Spent: cost.Dollars(0.002), Estimated: true} // a stream cut after output
	ctx, c := o.StartCall(context.Background(), observe.CallStart{Chain: "support", Stream: true})
	endAttempt(ctx, c, 0, 1, observe.AttemptEnd{Response: &llm.Response{}, Kind: llm.KindServer, Err: errors.New("cut"), Cost: billed})
	endAttempt(ctx, c, 2, 1, observe.AttemptEnd{Response: &llm.Response{}})
	d := costTargets[2]
	c.End(observe.CallEnd{Served: &d, Degraded: true, Outcome: "degraded", Attempts: 2, Cost: billed})

	spans := tel.Spans.GetSpans()
	if _, ok := spanAttrs(spans[1].Attributes)[keyCost]; ok {
		t.Error("a degradation's span carries a cost")
	}
	ca := spanAttrs(spans[2].Attributes)
	if ca[keyCost].AsFloat64() != 0.002 || ca[keyCostOverhead].AsFloat64() != 0.002 || !ca[keyCostEstimated].AsBool() {
		t.Errorf("call span: cost %v overhead %v estimated %v, want 0.002 0.002 true", ca[keyCost].AsFloat64(), ca[keyCostOverhead].AsFloat64(), ca[keyCostEstimated].AsBool())
	}
	if _, ok := ca[keyBudgetKey]; ok {
		t.Error("a call without a budget key carries one")
	}
	if v, ok := point[float64](t, tel.Metrics(t)[metricCost], keyChain.String("support"), keyTarget.String("sonnet"), keyTier.String("primary")); v != 0.002 {
		t.Errorf("cost of sonnet without a key: %v (present %v), want 0.002", v, ok)
	}
}

// TestCacheLostOnSpansAndMetrics: the part of an attempt's cost a lost
// prompt cache added is on its span and the call span, and counted by
// target; an attempt that lost none carries no such attribute.
func TestCacheLostOnSpansAndMetrics(t *testing.T) {
	tel := oteltest.New()
	o, err := New(Config{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Bind("support", costTargets); err != nil {
		t.Fatal(err)
	}
	failed := cost.Cost{}
	served := cost.Cost{Spent: cost.Dollars(0.004), CacheLost: cost.Dollars(0.0025)}
	ctx, c := o.StartCall(context.Background(), observe.CallStart{Chain: "support"})
	endAttempt(ctx, c, 0, 1, observe.AttemptEnd{Status: 529, Kind: llm.KindOverloaded, Err: errors.New("overloaded"), Cost: failed})
	endAttempt(ctx, c, 1, 1, observe.AttemptEnd{Response: &llm.Response{}, Status: 200, Cost: served})
	s := costTargets[1]
	c.End(observe.CallEnd{Served: &s, Outcome: "served", Attempts: 2, Cost: failed.Add(served)})
	spans := tel.Spans.GetSpans()
	if _, ok := spanAttrs(spans[0].Attributes)[keyCostCacheLost]; ok {
		t.Error("an attempt that lost no cache carries backstop.cost.cache_lost")
	}
	if v := spanAttrs(spans[1].Attributes)[keyCostCacheLost]; v.AsFloat64() != 0.0025 {
		t.Errorf("attempt span: cache_lost %v, want 0.0025", v.AsFloat64())
	}
	if v := spanAttrs(spans[2].Attributes)[keyCostCacheLost]; v.AsFloat64() != 0.0025 {
		t.Errorf("call span: cache_lost %v, want 0.0025", v.AsFloat64())
	}
	m := tel.Metrics(t)
	if v, ok := point[float64](t, m[metricCacheLost], keyChain.String("support"), keyTarget.String("mystery"), keyTier.String("sibling")); v != 0.0025 {
		t.Errorf("cache lost on mystery: %v (present %v), want 0.0025", v, ok)
	}
}

// TestSpendRefusalsAndPriceCapsAreRecorded: a target a money budget
// passed over is an event on the call span and a count by target and
// budget key; a price cap's refusal is an event too.
func TestSpendRefusalsAndPriceCapsAreRecorded(t *testing.T) {
	tel := oteltest.New()
	o, err := New(Config{TracerProvider: tel.TracerProvider, MeterProvider: tel.MeterProvider})
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Bind("support", costTargets); err != nil {
		t.Fatal(err)
	}
	ctx, c := o.StartCall(cost.WithKey(context.Background(), "tenant-7"), observe.CallStart{Chain: "support"})
	c.Event(observe.Skip{Target: costTargets[0], Cause: observe.SkipSpend, Reason: "budget tenants for tenant-7: $4.99 of $5 spent or reserved; this attempt may cost $0.02"})
	c.Event(observe.Skip{Target: costTargets[1], Cause: observe.SkipPrice, Reason: "worst case $0.2 is more than 2 × the primary's $0.02"})
	endAttempt(ctx, c, 2, 1, observe.AttemptEnd{Response: &llm.Response{}})
	s := costTargets[2]
	c.End(observe.CallEnd{Served: &s, Outcome: "degraded", Degraded: true, Attempts: 1})
	var names []string
	for _, sp := range tel.Spans.GetSpans() {
		for _, ev := range sp.Events {
			names = append(names, ev.Name)
		}
	}
	if len(names) != 2 || names[0] != eventSpendRefused || names[1] != eventPriceCapped {
		t.Errorf("call span events %v, want [%s %s]", names, eventSpendRefused, eventPriceCapped)
	}
	m := tel.Metrics(t)
	if v, ok := point[int64](t, m[metricSpendRefused], keyChain.String("support"), keyTarget.String("sonnet"), keyTier.String("primary"), keyBudgetKey.String("tenant-7")); v != 1 {
		t.Errorf("spend refusals on sonnet for tenant-7: %v (present %v), want 1", v, ok)
	}
}

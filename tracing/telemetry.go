package tracing

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// The API's global delegates as they are before any SDK is installed:
// while otel.Get*Provider still returns them, nothing would be recorded.
var (
	unsetTracerProvider = otel.GetTracerProvider()
	unsetMeterProvider  = otel.GetMeterProvider()
)

// Config configures a chain's telemetry. Every field's zero value is its
// documented default: the global providers, read on every call, and no
// content. New checks it with Validate.
type Config struct {
	// TracerProvider makes the spans. Nil means otel.GetTracerProvider(),
	// read on every call, so an SDK installed after the chain was built is
	// used from then on. A typed nil (a *sdktrace.TracerProvider never
	// built) is an error.
	TracerProvider trace.TracerProvider
	// MeterProvider makes the metrics. Nil means otel.GetMeterProvider(),
	// read on every call, whether TracerProvider is given or not. A typed
	// nil is an error.
	MeterProvider metric.MeterProvider
	// CaptureContent records prompts, system instructions and answers
	// (gen_ai.input.messages, gen_ai.system_instructions,
	// gen_ai.output.messages). Off by default: they may hold personal data.
	CaptureContent bool
}

// errHead heads every configuration error of the package; it matches the
// module's invalid-configuration sentinel (llm.ErrInvalidConfig).
var errHead = problems.Head("tracing: invalid configuration")

// Validate reports every problem of c at once, each naming the field and
// what to change; nil when New would take c (New also fails when a
// provider cannot make the instruments). Errors match the module's
// invalid-configuration sentinel (errors.Is(err, llm.ErrInvalidConfig)).
func (c Config) Validate() error {
	found := problems.New(errHead)
	if typedNil(c.TracerProvider) {
		found.Addf("Config.TracerProvider is a nil %T; give a provider, or nil for the global", c.TracerProvider)
	}
	if typedNil(c.MeterProvider) {
		found.Addf("Config.MeterProvider is a nil %T; give a provider, or nil for the global", c.MeterProvider)
	}
	return found.Err()
}

// typedNil reports whether v is an interface holding a nil pointer (or
// map, func, ...), which == nil does not catch.
func typedNil(v any) bool {
	if v == nil {
		return false
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// Observer is one chain's OpenTelemetry instrumentation: an
// observe.Observer (also an observe.Binder and observe.StateObserver) that
// turns the walk's events into spans, span events and metrics. Build one
// per chain with New; package chain does it for every chain, configured by
// Builder.TracerProvider, MeterProvider and CaptureContent. It is safe for
// concurrent use.
type Observer struct {
	chain string
	// tp and mp are the providers as configured: nil reads the global on
	// every call.
	tp      trace.TracerProvider
	mp      metric.MeterProvider
	content bool
	fixed   *instruments // with both providers given; nil when both are off
	cached  atomic.Pointer[instruments]
	targets []*target // by observe.Target.Index, set by Bind
}

var (
	_ observe.Observer      = (*Observer)(nil)
	_ observe.Binder        = (*Observer)(nil)
	_ observe.StateObserver = (*Observer)(nil)
)

// instruments are what one pair of providers gives.
type instruments struct {
	tp     trace.TracerProvider
	mp     metric.MeterProvider
	tracer trace.Tracer // nil: no traces
	m      *meters      // nil: no metrics
}

type meters struct {
	calls, attempts, retries, fallbacks, budget, breaker metric.Int64Counter
	shared, hedges, unpriced, spendRefused               metric.Int64Counter
	cost, cacheLost                                      metric.Float64Counter
	retriesPerCall                                       metric.Int64Histogram
	duration                                             metric.Float64Histogram
	tokens                                               metric.Int64Histogram
}

// New returns the instrumentation of one chain, configured by cfg. New
// checks cfg with Validate, and fails when a provider given in cfg cannot
// make the instruments; every error matches llm.ErrInvalidConfig.
func New(cfg Config) (*Observer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Observer{tp: cfg.TracerProvider, mp: cfg.MeterProvider, content: cfg.CaptureContent}
	if t.tp == nil && t.mp == nil {
		return t, nil
	}
	// Make the given providers' instruments now, so that one that cannot
	// fails New; a provider not given stands as the unset global, which
	// makes none.
	tp, mp := t.tp, t.mp
	if tp == nil {
		tp = unsetTracerProvider
	}
	if mp == nil {
		mp = unsetMeterProvider
	}
	in, err := build(tp, mp)
	if err != nil {
		// Only the meter's instruments can fail to be made.
		return nil, fmt.Errorf("%w: Config.MeterProvider could not make the instruments (%w); give a working provider, or nil for the global", errHead, err)
	}
	if t.tp != nil && t.mp != nil {
		if in.tracer != nil || in.m != nil {
			t.fixed = in
		}
	} else {
		t.cached.Store(in)
	}
	return t, nil
}

func build(tp trace.TracerProvider, mp metric.MeterProvider) (*instruments, error) {
	in := &instruments{tp: tp, mp: mp}
	if enabledTracer(tp) {
		in.tracer = tp.Tracer(scopeName)
	}
	if enabledMeter(mp) {
		m, err := newMeters(mp.Meter(scopeName))
		if err != nil {
			return nil, err
		}
		in.m = m
	}
	return in, nil
}

func enabledTracer(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return false
	}
	return tp != unsetTracerProvider
}

func enabledMeter(mp metric.MeterProvider) bool {
	switch mp.(type) {
	case metricnoop.MeterProvider, *metricnoop.MeterProvider:
		return false
	}
	return mp != unsetMeterProvider
}

func newMeters(m metric.Meter) (*meters, error) {
	var ms meters
	var err error
	counter := func(name, desc string) metric.Int64Counter {
		if err != nil {
			return nil
		}
		var c metric.Int64Counter
		c, err = m.Int64Counter(name, metric.WithDescription(desc))
		return c
	}
	ms.calls = counter(metricCalls, "Calls, by outcome (served, degraded, failed, canceled) and the tier that served.")
	ms.attempts = counter(metricAttempts, "Attempts sent to targets, by target and outcome.")
	ms.retries = counter(metricRetries, "Retries sent, by target and the failure that caused them.")
	ms.fallbacks = counter(metricFallbacks, "Moves to the next target, by the target left and the reason.")
	ms.budget = counter(metricBudgetExhausted, "Retries not sent because the target's retry budget was exhausted.")
	ms.spendRefused = counter(metricSpendRefused, "Attempts not sent because a money budget could not cover their worst case, by target and budget key.")
	ms.breaker = counter(metricBreakerChanges, "Circuit breaker state changes, by target and new state.")
	ms.shared = counter(metricSharedUnavailable, "Times a shared store (Redis) stopped answering, by store; calls go on with local state until it answers again.")
	ms.hedges = counter(metricHedges, "Hedges sent: attempts racing a slower attempt of the same tier, by the hedge's target.")
	if err != nil {
		return nil, err
	}
	if ms.unpriced, err = m.Int64Counter(metricUnpriced, metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts some of whose tokens have no known price: their cost is counted in backstop.cost only as far as prices are known. Give the target a Price.")); err != nil {
		return nil, err
	}
	// UCUM has no currency: "{USD}" is an annotation, as OpenTelemetry
	// writes a count of something that is not a unit.
	if ms.cost, err = m.Float64Counter(metricCost, metric.WithUnit("{USD}"),
		metric.WithDescription("What attempts cost, in US dollars, by chain, target, tier and budget key: failed, retried and lost attempts included, unknown prices left out (see backstop.unpriced).")); err != nil {
		return nil, err
	}
	if ms.cacheLost, err = m.Float64Counter(metricCacheLost, metric.WithUnit("{USD}"),
		metric.WithDescription("The part of backstop.cost that leaving a conversation's warm prompt cache added (a failover, a spread away from the deployment holding it), by chain, target, tier and budget key.")); err != nil {
		return nil, err
	}
	if ms.retriesPerCall, err = m.Int64Histogram(metricRetriesPerCall,
		metric.WithDescription("Attempts beyond the first that a successful call took: flat near zero when targets are healthy."),
		metric.WithExplicitBucketBoundaries(0, 1, 2, 3, 5, 8, 13)); err != nil {
		return nil, err
	}
	if ms.duration, err = m.Float64Histogram(metricOperationSeconds, metric.WithUnit("s"),
		metric.WithDescription("GenAI operation duration."),
		metric.WithExplicitBucketBoundaries(0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)); err != nil {
		return nil, err
	}
	if ms.tokens, err = m.Int64Histogram(metricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Number of input and output tokens used."),
		metric.WithExplicitBucketBoundaries(1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864)); err != nil {
		return nil, err
	}
	return &ms, nil
}

// active returns the instruments to use now, or nil when nothing would be
// recorded.
func (t *Observer) active() *instruments {
	tp, mp := t.tp, t.mp
	if tp == nil {
		tp = otel.GetTracerProvider()
	} else if mp != nil {
		return t.fixed // both given
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	if unset(tp, mp) {
		return nil
	}
	in := t.cached.Load()
	if in == nil || in.tp != tp || in.mp != mp {
		var err error
		if in, err = build(tp, mp); err != nil {
			otel.Handle(err)
			return nil
		}
		t.cached.Store(in)
	}
	if in.tracer == nil && in.m == nil {
		return nil // no-op providers installed: nothing to record either
	}
	return in
}

// unset reports whether tp and mp, as otel.Get*Provider returned them, are
// still the API's unset globals: the check every call makes, telemetry or
// not. It compares the interfaces' two words (type and pointer) instead of
// the interfaces: == on two interfaces of one dynamic type calls the
// runtime's ifaceeq, which cost the check more than the rest of it
// (BenchmarkStartCallUnset). The unset globals are pointers, so equal words
// are exactly equal interfaces; unequal words can only be interfaces that
// differ (or equal values boxed apart, which no pointer is). Should the
// layout ever change, the check would only answer false: active then
// builds instruments from the providers, finds nothing enabled (== says
// they are the unset ones) and still records nothing, more slowly.
func unset(tp trace.TracerProvider, mp metric.MeterProvider) bool {
	return *(*ifaceWords)(unsafe.Pointer(&tp)) == *(*ifaceWords)(unsafe.Pointer(&unsetTracerProvider)) &&
		*(*ifaceWords)(unsafe.Pointer(&mp)) == *(*ifaceWords)(unsafe.Pointer(&unsetMeterProvider))
}

// ifaceWords is how the gc toolchain lays out a non-empty interface value.
type ifaceWords struct{ tab, data unsafe.Pointer }

// target is one target's telemetry, prepared at Bind so that calls build
// no attributes of their own for it.
type target struct {
	name, tier, provider, model string
	spanName                    string
	spanAttrs                   []attribute.KeyValue
	set                         attribute.Set // chain, target, tier
}

// Bind implements observe.Binder: it prepares the spans' and metrics'
// attributes of every target and degradation of the chain named chain.
func (t *Observer) Bind(chain string, targets []observe.Target) error {
	t.chain = chain
	t.targets = make([]*target, len(targets))
	for i, o := range targets {
		t.targets[i] = t.prepare(o)
	}
	return nil
}

// of returns the prepared telemetry of o.
func (t *Observer) of(o observe.Target) *target {
	if o.Index >= 0 && o.Index < len(t.targets) {
		return t.targets[o.Index]
	}
	return t.prepare(o) // a target Bind was not told of: built on the spot
}

func (t *Observer) prepare(o observe.Target) *target {
	tg := &target{name: o.Name, tier: o.Tier, provider: o.Provider, model: o.Model}
	if o.Provider != "" {
		tg.spanName = attemptSpanPrefix + o.Model
		tg.spanAttrs = []attribute.KeyValue{
			genAIOperationName.String("chat"),
			genAIProviderName.String(o.Provider),
			genAIRequestModel.String(o.Model),
			keyTarget.String(o.Name),
			keyTier.String(o.Tier),
		}
	} else {
		tg.spanName = degradeSpanPrefix + o.Name
		tg.spanAttrs = []attribute.KeyValue{keyTarget.String(o.Name), keyTier.String(o.Tier)}
	}
	tg.set = attribute.NewSet(keyChain.String(t.chain), keyTarget.String(o.Name), keyTier.String(o.Tier))
	return tg
}

// Event implements observe.StateObserver: it counts a state change of a
// target's breaker and a shared store that stopped answering; it ignores
// the events it does not know.
func (t *Observer) Event(e observe.Event) {
	switch e := e.(type) {
	case observe.BreakerChange:
		t.breakerChanged(e)
	case observe.SharedUnavailable:
		t.sharedUnavailable(e)
	}
}

// breakerChanged counts a state change of a target's breaker.
func (t *Observer) breakerChanged(e observe.BreakerChange) {
	in := t.active()
	if in == nil || in.m == nil {
		return
	}
	in.m.breaker.Add(context.Background(), 1, metric.WithAttributes(keyChain.String(t.chain), keyTarget.String(e.Target.Name), keyBreakerState.String(e.To)))
}

// sharedUnavailable counts a shared store that stopped answering.
func (t *Observer) sharedUnavailable(e observe.SharedUnavailable) {
	in := t.active()
	if in == nil || in.m == nil {
		return
	}
	attrs := []attribute.KeyValue{keyChain.String(t.chain), keySharedStore.String(e.Store)}
	if e.Target != "" {
		attrs = append(attrs, keyTarget.String(e.Target))
	}
	in.m.shared.Add(context.Background(), 1, metric.WithAttributes(attrs...))
}

// call is one call's telemetry.
type call struct {
	t        *Observer
	in       *instruments
	span     trace.Span // nil without traces
	sent     int        // attempts sent
	fallback int
	key      string // the caller's budget key (cost.Key), "" for none
	// served is the cost of the last attempt that answered, and overhead
	// that of every other attempt: what the call paid beyond its answer.
	served, overhead cost.Cost
	answered         bool
}

// StartCall implements observe.Observer: it starts the call span, or
// observes nothing (a nil Call) when nothing would be recorded.
func (t *Observer) StartCall(ctx context.Context, _ observe.CallStart) (context.Context, observe.Call) {
	in := t.active()
	if in == nil {
		return ctx, nil
	}
	c := &call{t: t, in: in, key: cost.Key(ctx)}
	if in.tracer != nil {
		attrs := []attribute.KeyValue{keyChain.String(t.chain)}
		if c.key != "" {
			attrs = append(attrs, keyBudgetKey.String(c.key))
		}
		ctx, c.span = in.tracer.Start(ctx, callSpanPrefix+t.chain, trace.WithSpanKind(trace.SpanKindInternal),
			trace.WithAttributes(attrs...))
	}
	return ctx, c
}

// attempt is one attempt's telemetry.
type attempt struct {
	c    *call
	tg   *target
	span trace.Span
}

// StartAttempt starts the span of an attempt and returns the context to
// pass to the provider.
func (c *call) StartAttempt(ctx context.Context, e observe.AttemptStart) (context.Context, observe.Attempt) {
	tg := c.t.of(e.Target)
	a := &attempt{c: c, tg: tg}
	if e.Hedge && c.in.m != nil {
		c.in.m.hedges.Add(context.Background(), 1, metric.WithAttributeSet(tg.set))
	}
	if c.span == nil {
		return ctx, a
	}
	n := e.N
	p := &e.Request.Params
	n2 := len(tg.spanAttrs) + 1
	if n > 1 {
		n2++
	}
	if p.MaxTokens > 0 {
		n2++
	}
	if p.Temperature != nil {
		n2++
	}
	if p.TopP != nil {
		n2++
	}
	if c.t.content {
		n2 += 2
	}
	attrs := make([]attribute.KeyValue, 0, n2)
	attrs = append(attrs, tg.spanAttrs...)
	attrs = append(attrs, keyAttempt.Int(n))
	if n > 1 {
		attrs = append(attrs, httpRequestResendCount.Int(n-1))
	}
	if tg.provider == "" {
		p = &llm.Params{} // a degradation sends no parameters
	}
	if p.MaxTokens > 0 {
		attrs = append(attrs, genAIRequestMaxTokens.Int(p.MaxTokens))
	}
	if p.Temperature != nil {
		attrs = append(attrs, genAIRequestTemperature.Float64(*p.Temperature))
	}
	if p.TopP != nil {
		attrs = append(attrs, genAIRequestTopP.Float64(*p.TopP))
	}
	if c.t.content {
		attrs = append(attrs, contentAttrs(e.Request)...)
	}
	attrs = append(attrs, decisionAttrs(c.span, tg, e)...)
	kind := trace.SpanKindClient
	if tg.provider == "" {
		kind = trace.SpanKindInternal // a degradation: no remote call
	}
	ctx, a.span = c.in.tracer.Start(ctx, tg.spanName, trace.WithSpanKind(kind), trace.WithAttributes(attrs...))
	return ctx, a
}

// Event records one decision of the call; it ignores the events it does
// not know.
func (c *call) Event(e observe.Event) {
	switch e := e.(type) {
	case observe.Retry:
		c.retry(e)
	case observe.Skip:
		c.skip(e)
	case observe.Fallback:
		c.fallbackTo(e)
	case observe.GateClosed:
		c.gateClosed(e)
	case observe.ValidationFailed:
		c.validationFailed(e)
	case observe.SharedLocal:
		c.sharedLocal()
	}
}

// fallbackTo records a move to the next target.
func (c *call) fallbackTo(e observe.Fallback) {
	c.fallback++
	if c.span != nil {
		c.span.AddEvent(eventFallback, trace.WithAttributes(keyFrom.String(e.From.Name), keyTo.String(e.To.Name), keyReason.String(e.Reason)))
	}
	if c.in.m != nil {
		c.in.m.fallbacks.Add(context.Background(), 1, metric.WithAttributes(keyChain.String(c.t.chain), keyFrom.String(e.From.Name), keyReason.String(e.Reason)))
	}
}

// End ends the attempt: its answer, or its failure with status and kind.
func (a *attempt) End(e observe.AttemptEnd) {
	c, tg := a.c, a.tg
	resp, status, kind, err, d := e.Response, e.Status, e.Kind, e.Err, e.Duration
	c.sent++
	if err == nil && !e.Lost {
		if c.answered { // an earlier answer did not serve after all
			c.overhead = c.overhead.Add(c.served)
		}
		c.served, c.answered = e.Cost, true
	} else {
		c.overhead = c.overhead.Add(e.Cost)
	}
	outcome := "ok"
	switch {
	case e.Lost:
		outcome = "lost"
	case err != nil:
		outcome = kind.String()
	}
	if a.span != nil {
		attrs := make([]attribute.KeyValue, 0, 12)
		if tg.provider != "" { // a degradation costs nothing
			attrs = appendCost(attrs, keyCost, e.Cost)
		}
		if status != 0 {
			attrs = append(attrs, httpResponseStatusCode.Int(status))
		}
		attrs = appendNonEmpty(attrs, keyRequestID, e.ProviderRequestID())
		if resp != nil {
			attrs = appendNonEmpty(attrs, genAIResponseModel, resp.Model)
			attrs = appendNonEmpty(attrs, genAIResponseID, resp.ID)
			if tg.provider != "" {
				attrs = append(attrs, genAIUsageInputTokens.Int(resp.Usage.InputTokens),
					genAIUsageOutputTokens.Int(resp.Usage.OutputTokens))
			}
			if resp.FinishReason != "" {
				attrs = append(attrs, genAIResponseFinishReasons.StringSlice([]string{resp.FinishReason}))
			}
			if c.t.content && err == nil {
				attrs = append(attrs, genAIOutputMessages.String(outputJSON(resp.Text, resp.FinishReason)))
			}
		}
		switch {
		case e.Lost: // the race's, not the target's: no error
			attrs = append(attrs, keyHedgeLost.Bool(true))
		case err != nil:
			attrs = append(attrs, keyErrorKind.String(outcome), keyErrorType.String(errorType(status, kind)))
			a.span.SetStatus(codes.Error, describe(err, kind, c.t.content))
		}
		a.span.SetAttributes(attrs...)
		a.span.End()
	}
	if m := c.in.m; m != nil {
		ctx := context.Background()
		m.attempts.Add(ctx, 1, metric.WithAttributeSet(tg.set), metric.WithAttributes(keyOutcome.String(outcome)))
		if tg.provider != "" {
			c.countCost(ctx, m, tg, e.Cost)
		}
		if tg.provider != "" && !e.Lost { // a canceled loser's time says nothing of the operation
			op := []attribute.KeyValue{genAIOperationName.String("chat"), genAIProviderName.String(tg.provider), genAIRequestModel.String(tg.model)}
			if resp != nil && resp.Model != "" {
				op = append(op, genAIResponseModel.String(resp.Model))
			}
			if err != nil {
				m.duration.Record(ctx, d.Seconds(), metric.WithAttributes(append(op, keyErrorType.String(errorType(status, kind)))...))
			} else {
				m.duration.Record(ctx, d.Seconds(), metric.WithAttributes(op...))
			}
			if resp != nil { // an answer that failed the schema was billed too
				m.tokens.Record(ctx, int64(resp.Usage.InputTokens), metric.WithAttributes(append(op, genAITokenType.String("input"))...))
				m.tokens.Record(ctx, int64(resp.Usage.OutputTokens), metric.WithAttributes(append(op, genAITokenType.String("output"))...))
			}
		}
	}
}

// Event records on the attempt how long its first chunk took
// (gen_ai.response.time_to_first_chunk, seconds); it ignores the events it
// does not know.
func (a *attempt) Event(e observe.Event) {
	if e, ok := e.(observe.FirstChunk); ok && a.span != nil {
		a.span.SetAttributes(genAITimeToFirstChunk.Float64(e.After.Seconds()))
	}
}

// retry records that the chain waits before retrying a target.
func (c *call) retry(e observe.Retry) {
	tg := c.t.of(e.Target)
	if c.span != nil {
		attrs := []attribute.KeyValue{keyTarget.String(tg.name), keyWait.Float64(e.Wait.Seconds()), keyReason.String(e.Kind.String())}
		if e.RetryAfter > 0 {
			attrs = append(attrs, keyRetryAfter.Float64(e.RetryAfter.Seconds()))
		}
		if e.Reason != "" {
			attrs = append(attrs, keyDecision.String(e.Reason))
		}
		c.span.AddEvent(eventRetry, trace.WithAttributes(attrs...))
	}
	if c.in.m != nil {
		c.in.m.retries.Add(context.Background(), 1, metric.WithAttributeSet(tg.set), metric.WithAttributes(keyReason.String(e.Kind.String())))
	}
}

// skip records a target, or a retry of it, passed over without a request:
// an event for a breaker, a budget or a gate, and the budget's metric.
func (c *call) skip(e observe.Skip) {
	if e.Cause == observe.SkipBudget && c.in.m != nil {
		c.in.m.budget.Add(context.Background(), 1, metric.WithAttributeSet(c.t.of(e.Target).set))
	}
	if e.Cause == observe.SkipSpend && c.in.m != nil {
		c.in.m.spendRefused.Add(context.Background(), 1, metric.WithAttributeSet(c.keyed(c.t.of(e.Target))))
	}
	if c.span == nil {
		return
	}
	name := ""
	switch e.Cause {
	case observe.SkipBreaker:
		name = eventBreakerRejected
	case observe.SkipBudget:
		name = eventBudgetExhausted
	case observe.SkipGate:
		name = eventGateClosed
	case observe.SkipSpend:
		name = eventSpendRefused
	case observe.SkipPrice:
		name = eventPriceCapped
	default:
		return
	}
	c.span.AddEvent(name, trace.WithAttributes(keyTarget.String(e.Target.Name), keyReason.String(e.Reason)))
}

// gateClosed records that a target's gate was closed.
func (c *call) gateClosed(e observe.GateClosed) {
	if c.span == nil {
		return
	}
	c.span.AddEvent(eventGateClosed, trace.WithAttributes(keyTarget.String(e.Target.Name), keyGateUntil.String(e.Until.UTC().Format(time.RFC3339Nano))))
}

// validationFailed records where an answer broke its schema. No answer
// text is recorded.
func (c *call) validationFailed(e observe.ValidationFailed) {
	if c.span == nil {
		return
	}
	c.span.AddEvent(eventValidationFailed, trace.WithAttributes(keyTarget.String(e.Target.Name),
		keyValidationPath.StringSlice(e.Paths), keyValidationKey.StringSlice(e.Keywords)))
}

// sharedLocal records on the call span that the call decided with local
// state because the shared state did not answer.
func (c *call) sharedLocal() {
	if c.span == nil {
		return
	}
	c.span.AddEvent(eventSharedLocal, trace.WithAttributes(keyErrorType.String("shared_unavailable")))
}

// End ends the call span and counts the call.
func (c *call) End(e observe.CallEnd) {
	var served *target
	if e.Served != nil {
		served = c.t.of(*e.Served)
	}
	if c.span != nil {
		attrs := make([]attribute.KeyValue, 0, 16)
		attrs = append(attrs, keyAttempts.Int(c.sent), keyFallbacks.Int(c.fallback), keyDegraded.Bool(e.Degraded))
		overhead := c.overhead
		if served == nil && c.answered { // nothing served: every attempt was overhead
			overhead = overhead.Add(c.served)
		}
		attrs = appendCost(attrs, keyCost, e.Cost)
		if overhead.Spent > 0 || !overhead.Unpriced {
			attrs = append(attrs, keyCostOverhead.Float64(overhead.Spent.Dollars()))
		}
		if e.Stream != "" {
			attrs = append(attrs, keyStreamOutcome.String(e.Stream))
		}
		if served != nil {
			attrs = append(attrs, keyServedTarget.String(served.name), keyServedTier.String(served.tier))
			if e.Model != "" {
				attrs = append(attrs, genAIResponseModel.String(e.Model))
			}
			if e.RequestID != "" {
				attrs = append(attrs, keyServedRequestID.String(e.RequestID), keyRequestID.String(e.RequestID))
			}
			if e.Degraded && e.Age > 0 {
				attrs = append(attrs, keyAge.Float64(e.Age.Seconds()))
			}
		}
		if e.ErrorType != "" {
			attrs = append(attrs, keyErrorType.String(e.ErrorType))
			c.span.SetStatus(codes.Error, e.Outcome+": "+e.ErrorType)
		}
		c.span.SetAttributes(attrs...)
		c.span.End()
	}
	if m := c.in.m; m != nil {
		ctx := context.Background()
		tier := ""
		if served != nil {
			tier = served.tier
		}
		m.calls.Add(ctx, 1, metric.WithAttributes(keyChain.String(c.t.chain), keyOutcome.String(e.Outcome), keyServedTier.String(tier)))
		if e.ErrorType == "" {
			m.retriesPerCall.Record(ctx, int64(max(c.sent-1, 0)), metric.WithAttributes(keyChain.String(c.t.chain)))
		}
	}
}

// appendCost appends c as k (dollars) with the flags that qualify it:
// backstop.cost.unpriced when some tokens had no known price (k is then a
// lower bound, and left out when no token had one: an unknown cost must
// not read as 0), backstop.cost.estimated when some were estimated, and
// backstop.cost.cache_lost, the part of it a warm prompt cache left
// behind added, when there is one.
func appendCost(attrs []attribute.KeyValue, k attribute.Key, c cost.Cost) []attribute.KeyValue {
	if c.Spent != 0 || !c.Unpriced {
		attrs = append(attrs, k.Float64(c.Spent.Dollars()))
	}
	if c.Unpriced {
		attrs = append(attrs, keyCostUnpriced.Bool(true))
	}
	if c.Estimated {
		attrs = append(attrs, keyCostEstimated.Bool(true))
	}
	if c.CacheLost != 0 {
		attrs = append(attrs, keyCostCacheLost.Float64(c.CacheLost.Dollars()))
	}
	return attrs
}

// countCost adds what an attempt on tg cost to the cost metric (what the
// known prices account for) and counts it as unpriced when some of its
// tokens had no known price, both by tg's chain, target and tier and the
// call's budget key.
func (c *call) countCost(ctx context.Context, m *meters, tg *target, k cost.Cost) {
	if k.Spent == 0 && !k.Unpriced {
		return // not billed: nothing to add
	}
	opt := metric.WithAttributeSet(c.keyed(tg))
	if k.Spent != 0 {
		m.cost.Add(ctx, k.Spent.Dollars(), opt)
	}
	if k.CacheLost != 0 {
		m.cacheLost.Add(ctx, k.CacheLost.Dollars(), opt)
	}
	if k.Unpriced {
		m.unpriced.Add(ctx, 1, opt)
	}
}

// keyed is tg's attribute set with the call's budget key, when it has one.
func (c *call) keyed(tg *target) attribute.Set {
	if c.key == "" {
		return tg.set
	}
	// One set, built whole: merging two costs the SDK more.
	return attribute.NewSet(keyChain.String(c.t.chain), keyTarget.String(tg.name), keyTier.String(tg.tier), keyBudgetKey.String(c.key))
}

// errorType is error.type for a failed attempt: the HTTP status when one
// arrived (as the HTTP conventions do), else the kind.
func errorType(status int, kind llm.Kind) string {
	if status != 0 && status != 200 {
		return strconv.Itoa(status)
	}
	return kind.String()
}

// describe is a failed attempt's span status: the error's line, which
// never quotes the prompt or the answer (an *llm.Error keeps the provider's
// own words in Detail), except for answers that broke the schema, whose
// messages may quote the answer: those say only their kind. With content
// capture on, the provider's Detail follows the line.
func describe(err error, kind llm.Kind, content bool) string {
	if kind == llm.KindInvalidOutput {
		return "invalid_output: the answer does not match the schema (see backstop.validation.failed)"
	}
	var le *llm.Error
	if content && asLLM(err, &le) && le.Detail != "" {
		return err.Error() + " | provider detail: " + le.Detail
	}
	return err.Error()
}

// asLLM finds the first *llm.Error in err's tree, as errors.As does
// (Unwrap() error and Unwrap() []error, depth first).
func asLLM(err error, le **llm.Error) bool {
	for err != nil {
		switch u := err.(type) {
		case *llm.Error:
			*le = u
			return true
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if asLLM(e, le) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}

// contentAttrs are the opt-in content attributes of a request, in the
// GenAI conventions' JSON shapes.
func contentAttrs(req llm.Request) []attribute.KeyValue {
	type part struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	}
	type msg struct {
		Role  string `json:"role"`
		Parts []part `json:"parts"`
	}
	msgs := make([]msg, 0, len(req.Messages))
	for _, m := range req.Messages {
		msgs = append(msgs, msg{Role: string(m.Role), Parts: []part{{Type: "text", Content: m.Content}}})
	}
	in, _ := json.Marshal(msgs)
	attrs := []attribute.KeyValue{genAIInputMessages.String(string(in))}
	if req.System != "" {
		sys, _ := json.Marshal([]part{{Type: "text", Content: req.System}})
		attrs = append(attrs, genAISystemInstructions.String(string(sys)))
	}
	return attrs
}

func outputJSON(text, finish string) string {
	out, _ := json.Marshal([]map[string]any{{
		"role":          "assistant",
		"parts":         []map[string]string{{"type": "text", "content": text}},
		"finish_reason": finish,
	}})
	return string(out)
}

func appendNonEmpty(attrs []attribute.KeyValue, k attribute.Key, v string) []attribute.KeyValue {
	if v == "" {
		return attrs
	}
	return append(attrs, k.String(v))
}

// decisionAttrs are the attributes of an attempt span that say why it was
// sent where it was (a spreading strategy's choice) and whether it is a
// hedge, which it also records on the call span as an event.
func decisionAttrs(call trace.Span, tg *target, e observe.AttemptStart) []attribute.KeyValue {
	if e.Choice == nil && !e.Hedge {
		return nil
	}
	var attrs []attribute.KeyValue
	if e.Choice != nil {
		attrs = append(attrs, keySpreadStrategy.String(e.Choice.Strategy.String()), keySpreadChoice.String(e.Choice.String()))
	}
	if e.Hedge {
		attrs = append(attrs, keyHedge.Bool(true), keyHedgeOf.String(e.HedgeOf), keyHedgeDelay.Float64(e.HedgeDelay.Seconds()))
		call.AddEvent(eventHedge, trace.WithAttributes(keyFrom.String(e.HedgeOf), keyTo.String(tg.name),
			keyHedgeDelay.Float64(e.HedgeDelay.Seconds())))
	}
	return attrs
}

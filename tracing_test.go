package backstop_test

// End-to-end tests of the telemetry: the whole span tree of a call, its
// metrics, and a scan of everything exported for secrets.

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/internal/oteltest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/spread"
	"github.com/backstop-llm/backstop/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// support is the chain "support" recording to tel: sonnet on p, with
// params, then the sibling haiku on p.
func support(t *testing.T, tel *oteltest.Telemetry, p llm.Provider, params llm.Params) *chain.Chain {
	t.Helper()
	c, err := chain.New("support").TracerProvider(tel.TracerProvider).MeterProvider(tel.MeterProvider).
		Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet, Params: params}).
		OrSibling(chain.Target{Name: "haiku", Provider: p, Model: haiku}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// sumOf adds the points of a counter whose attributes include want.
func sumOf(t *testing.T, data metricdata.Aggregation, want ...attribute.KeyValue) int64 {
	t.Helper()
	s, ok := data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("not an int64 sum: %T", data)
	}
	var n int64
	for _, p := range s.DataPoints {
		match := true
		for _, kv := range want {
			if v, ok := p.Attributes.Value(kv.Key); !ok || v != kv.Value {
				match = false
			}
		}
		if match {
			n += p.Value
		}
	}
	return n
}

// The call the issue describes: retried twice on the primary, fell back
// once, served by the sibling.
func TestTraceOfARetriedFallbackServedBySibling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := oteltest.New()
		f := fake.New()
		c := support(t, tel, claude(t, f), llm.Params{MaxTokens: 300})
		f.Script(sonnet, fake.Overloaded(), fake.Overloaded(), fake.Status(529).RetryAfter("2"))
		f.Script(haiku, fake.Answer("ok").Model(haiku+"-20261101").RequestID("req_served").Usage(12, 3))
		res, err := c.Call(t.Context(), ask)
		if err != nil {
			t.Fatal(err)
		}

		spans := tel.Spans.GetSpans()
		if len(spans) != 5 {
			t.Fatalf("%d spans, want 5 (4 attempts and the call)", len(spans))
		}
		call := spans[4]
		if call.Name != "backstop.call support" || call.SpanKind != trace.SpanKindInternal || call.Parent.IsValid() {
			t.Fatalf("call span %q kind %v parent %v", call.Name, call.SpanKind, call.Parent)
		}
		ca := attrs(call.Attributes)
		for k, want := range map[attribute.Key]any{
			tracing.KeyChain: "support", tracing.KeyServedTarget: "haiku", tracing.KeyServedTier: "sibling",
			tracing.GenAIResponseModel: haiku + "-20261101", tracing.KeyServedRequestID: "req_served",
			tracing.KeyAttempts: int64(4), tracing.KeyFallbacks: int64(1), tracing.KeyDegraded: false,
		} {
			if got := ca[k].AsInterface(); got != want {
				t.Errorf("call span %s = %v, want %v", k, got, want)
			}
		}
		for i, s := range spans[:4] {
			a := attrs(s.Attributes)
			if s.Parent.SpanID() != call.SpanContext.SpanID() || s.SpanKind != trace.SpanKindClient {
				t.Errorf("attempt %d: parent %v kind %v", i, s.Parent.SpanID(), s.SpanKind)
			}
			if a[tracing.GenAIOperationName].AsString() != "chat" || a[tracing.GenAIProviderName].AsString() != "anthropic" ||
				a[tracing.KeyRequestID].AsString() == "" {
				t.Errorf("attempt %d attributes %v", i, a)
			}
			if i < 3 {
				if s.Name != "chat "+sonnet || a[tracing.KeyAttempt].AsInt64() != int64(i+1) || a[tracing.HTTPResponseStatusCode].AsInt64() != 529 ||
					a[tracing.ErrorType].AsString() != "529" || a[tracing.KeyErrorKind].AsString() != "overloaded" ||
					a[tracing.GenAIRequestMaxTokens].AsInt64() != 300 || s.Status.Code.String() != "Error" {
					t.Errorf("primary attempt %d: %s %v status %v", i, s.Name, a, s.Status)
				}
				if rc, ok := a[tracing.HTTPRequestResendCount]; (i == 0) == ok || ok && rc.AsInt64() != int64(i) {
					t.Errorf("attempt %d resend count %v (present %v)", i, rc.AsInt64(), ok)
				}
			}
		}
		served := attrs(spans[3].Attributes)
		if spans[3].Name != "chat "+haiku || served[tracing.GenAIResponseModel].AsString() != haiku+"-20261101" ||
			served[tracing.KeyRequestID].AsString() != "req_served" || served[tracing.GenAIUsageInputTokens].AsInt64() != 12 ||
			served[tracing.GenAIUsageOutputTokens].AsInt64() != 3 || served[tracing.KeyTier].AsString() != "sibling" ||
			fmt.Sprint(served[tracing.GenAIResponseFinishReasons].AsStringSlice()) != "[end_turn]" {
			t.Errorf("served attempt %v", served)
		}

		var retries, fallbacks int
		for _, e := range call.Events {
			a := attrs(e.Attributes)
			switch e.Name {
			case tracing.EventRetry:
				retries++
				if a[tracing.KeyTarget].AsString() != "sonnet" || a[tracing.KeyReason].AsString() != "overloaded" {
					t.Errorf("retry event %v", a)
				}
				if w := a[tracing.KeyWait].AsFloat64(); w != res.Attempts[retries].Wait.Seconds() {
					t.Errorf("retry %d waited %v, the result says %v", retries, w, res.Attempts[retries].Wait)
				}
			case tracing.EventFallback:
				fallbacks++
				if a[tracing.KeyFrom].AsString() != "sonnet" || a[tracing.KeyTo].AsString() != "haiku" || a[tracing.KeyReason].AsString() != "overloaded" {
					t.Errorf("fallback event %v", a)
				}
			}
		}
		if retries != 2 || fallbacks != 1 {
			t.Fatalf("%d retry and %d fallback events, want 2 and 1", retries, fallbacks)
		}

		m := tel.Metrics(t)
		if n := sumOf(t, m[tracing.MetricCalls], tracing.KeyOutcome.String("served"), tracing.KeyServedTier.String("sibling")); n != 1 {
			t.Errorf("calls served by the sibling: %d", n)
		}
		if n := sumOf(t, m[tracing.MetricAttempts], tracing.KeyTarget.String("sonnet"), tracing.KeyOutcome.String("overloaded")); n != 3 {
			t.Errorf("overloaded attempts on sonnet: %d", n)
		}
		if n := sumOf(t, m[tracing.MetricRetries], tracing.KeyTarget.String("sonnet")); n != 2 {
			t.Errorf("retries: %d", n)
		}
		if n := sumOf(t, m[tracing.MetricFallbacks], tracing.KeyFrom.String("sonnet")); n != 1 {
			t.Errorf("fallbacks: %d", n)
		}
		if h := m[tracing.MetricOperationSeconds].(metricdata.Histogram[float64]); len(h.DataPoints) != 2 {
			t.Errorf("operation duration points: %d (one per model and outcome)", len(h.DataPoints))
		}
		tokens := m[tracing.MetricTokenUsage].(metricdata.Histogram[int64])
		var in, out int64
		for _, p := range tokens.DataPoints {
			if v, _ := p.Attributes.Value(tracing.GenAITokenType); v.AsString() == "input" {
				in += p.Sum
			} else {
				out += p.Sum
			}
		}
		if in != 12 || out != 3 {
			t.Errorf("token usage in %d out %d", in, out)
		}
		rpc := m[tracing.MetricRetriesPerCall].(metricdata.Histogram[int64])
		if len(rpc.DataPoints) != 1 || rpc.DataPoints[0].Count != 1 || rpc.DataPoints[0].Sum != 3 {
			t.Errorf("retries per successful call: %+v", rpc.DataPoints)
		}
	})
}

func TestBreakerChangesAndSkipsAreRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := oteltest.New()
		f := fake.New()
		c := support(t, tel, claude(t, f), llm.Params{})
		f.Script(sonnet, fake.SpendCap())
		mustCall(t, c) // opens the breaker at once
		tel.Spans.Reset()
		mustCall(t, c)
		call := tel.Spans.GetSpans()[1]
		if len(call.Events) == 0 || call.Events[0].Name != tracing.EventBreakerRejected {
			t.Fatalf("events %v", call.Events)
		}
		if n := sumOf(t, tel.Metrics(t)[tracing.MetricBreakerChanges], tracing.KeyTarget.String("sonnet"), tracing.KeyBreakerState.String("open")); n != 1 {
			t.Fatalf("breaker changes to open: %d", n)
		}
	})
}

// Everything exported (span names, attributes, events, status messages,
// metric attributes) is scanned for the API key and the prompt: with
// content capture off neither appears; with it on, the prompt does.
func TestTelemetryHoldsNoSecretsOrContent(t *testing.T) {
	const key = "sk-ant-api03-SECRET-KEY-4242"
	const prompt = "My passport number is X1234567; where is my order?"
	for _, capture := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			tel := oteltest.New()
			f := fake.New()
			p, err := anthropic.New(anthropic.Config{APIKey: key, BaseURL: f.URL(), HTTPClient: f.Client()})
			if err != nil {
				t.Fatal(err)
			}
			c, err := chain.New("support").TracerProvider(tel.TracerProvider).MeterProvider(tel.MeterProvider).CaptureContent(capture).
				Schema(answerSchema).
				Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet, System: "Secret system prompt"}).
				OrSibling(chain.Target{Name: "haiku", Provider: p, Model: haiku}).
				OrDegrade(degrade.Static(llm.Response{Text: `{"answer": "busy", "confidence": 0}`})).Build()
			if err != nil {
				t.Fatal(err)
			}
			// Answers that quote the prompt, fail the schema, and errors.
			f.Script(sonnet, fake.Answer(`{"answer": "`+prompt+`", "confidence": "`+prompt+`"}`), fake.Status(401).Message("invalid x-api-key"))
			f.Script(haiku, fake.BadRequest("bad request"))
			req := llm.Request{System: "Secret caller prompt", Messages: []llm.Message{{Role: llm.RoleUser, Content: prompt}}}
			_, _ = c.Call(t.Context(), req)
			f.Script(haiku, fake.Answer(`{"answer": "`+prompt+`", "confidence": 1}`))
			_, _ = c.Call(t.Context(), req)

			var dump strings.Builder
			for _, s := range tel.Spans.GetSpans() {
				fmt.Fprintln(&dump, s.Name, s.Status.Description)
				for _, a := range s.Attributes {
					fmt.Fprintln(&dump, a.Key, a.Value.Emit())
				}
				for _, e := range s.Events {
					fmt.Fprintln(&dump, e.Name)
					for _, a := range e.Attributes {
						fmt.Fprintln(&dump, a.Key, a.Value.Emit())
					}
				}
			}
			fmt.Fprintf(&dump, "%+v", tel.Collect(t))
			out := dump.String()
			if strings.Contains(out, key) || strings.Contains(out, "SECRET-KEY") {
				t.Fatalf("capture %v: the API key is in the telemetry", capture)
			}
			for _, secret := range []string{"X1234567", "Secret system prompt", "Secret caller prompt"} {
				if strings.Contains(out, secret) != capture {
					t.Errorf("capture %v: %q present = %v", capture, secret, !capture)
				}
			}
		})
	}
}

func TestNoopAndUnsetProvidersRecordNothing(t *testing.T) {
	f := fake.New()
	p := claude(t, f)
	// With the unset globals (no SDK installed) the chain builds and calls
	// without recording; the call succeeds.
	c, err := chain.New("support").Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(t.Context(), ask); err != nil {
		t.Fatal(err)
	}
}

// A hedged call in a tier that spreads its calls: the attempt spans say
// which strategy chose each target and which attempt is the hedge, the
// loser is not an error, and the call span records the hedge.
func TestTraceOfAHedgedRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := oteltest.New()
		eu1, eu2 := fake.New(), fake.New()
		eu1.Script(sonnet, fake.Answer("slow").After(8*time.Second))
		eu2.Script(sonnet, fake.Answer("fast").RequestID("req_fast").After(200*time.Millisecond))
		c, err := chain.New("support").TracerProvider(tel.TracerProvider).MeterProvider(tel.MeterProvider).
			Spread(spread.Weighted).Hedge(hedge.Config{Delay: time.Second}).
			Primary(chain.Target{Name: "eu-1", Provider: claude(t, eu1), Model: sonnet, Weight: 1e9}).
			OrDeployment(chain.Target{Name: "eu-2", Provider: claude(t, eu2), Model: sonnet}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		if res, err := c.Call(t.Context(), ask); err != nil || res.Served.Target != "eu-2" {
			t.Fatalf("%v %+v", err, res)
		}
		spans := tel.Spans.GetSpans()
		byTarget := map[string]tracetest.SpanStub{}
		var call tracetest.SpanStub
		for _, s := range spans {
			if strings.HasPrefix(s.Name, tracing.CallSpanPrefix) {
				call = s
				continue
			}
			byTarget[attrs(s.Attributes)[tracing.KeyTarget].AsString()] = s
		}
		lost, won := byTarget["eu-1"], byTarget["eu-2"]
		la, wa := attrs(lost.Attributes), attrs(won.Attributes)
		if la[tracing.KeySpreadStrategy].AsString() != "weighted" || la[tracing.KeySpreadChoice].AsString() != "weighted 1/2: weight 1000000000 of 1000000001" {
			t.Errorf("the first attempt's choice: %v %v", la[tracing.KeySpreadStrategy], la[tracing.KeySpreadChoice])
		}
		if !la[tracing.KeyHedgeLost].AsBool() || lost.Status.Code == codes.Error {
			t.Errorf("the loser: lost %v, status %v; want lost and no error", la[tracing.KeyHedgeLost], lost.Status)
		}
		if !wa[tracing.KeyHedge].AsBool() || wa[tracing.KeyHedgeOf].AsString() != "eu-1" || wa[tracing.KeyHedgeDelay].AsFloat64() != 1 ||
			wa[tracing.KeyRequestID].AsString() != "req_fast" || wa[tracing.KeySpreadChoice].AsString() != "weighted 2/2: weight 1" {
			t.Errorf("the hedge's span: %v", wa)
		}
		var hedges int
		for _, e := range call.Events {
			if e.Name == tracing.EventHedge {
				hedges++
				if ea := attrs(e.Attributes); ea[tracing.KeyFrom].AsString() != "eu-1" || ea[tracing.KeyTo].AsString() != "eu-2" {
					t.Errorf("hedge event %v", ea)
				}
			}
		}
		if hedges != 1 {
			t.Errorf("%d hedge events on the call span; want 1", hedges)
		}
		m := tel.Metrics(t)
		if n := sumOf(t, m[tracing.MetricHedges], tracing.KeyTarget.String("eu-2")); n != 1 {
			t.Errorf("backstop.hedges = %d; want 1", n)
		}
		if n := sumOf(t, m[tracing.MetricAttempts], tracing.KeyOutcome.String("lost")); n != 1 {
			t.Errorf("attempts lost = %d; want 1", n)
		}
	})
}

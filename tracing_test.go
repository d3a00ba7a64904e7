package backstop_test

// End-to-end tests of the telemetry: the whole span tree of a call, its
// metrics, and a scan of everything exported for secrets.

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/internal/oteltest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/spread"
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
			attribute.Key("backstop.chain"): "support", attribute.Key("backstop.served.target"): "haiku", attribute.Key("backstop.served.tier"): "sibling",
			attribute.Key("gen_ai.response.model"): haiku + "-20261101", attribute.Key("backstop.served.request_id"): "req_served",
			attribute.Key("backstop.attempts"): int64(4), attribute.Key("backstop.fallbacks"): int64(1), attribute.Key("backstop.degraded"): false,
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
			if a[attribute.Key("gen_ai.operation.name")].AsString() != "chat" || a[attribute.Key("gen_ai.provider.name")].AsString() != "anthropic" ||
				a[attribute.Key("backstop.request_id")].AsString() == "" {
				t.Errorf("attempt %d attributes %v", i, a)
			}
			if i < 3 {
				if s.Name != "chat "+sonnet || a[attribute.Key("backstop.attempt")].AsInt64() != int64(i+1) || a[attribute.Key("http.response.status_code")].AsInt64() != 529 ||
					a[attribute.Key("error.type")].AsString() != "529" || a[attribute.Key("backstop.error.kind")].AsString() != "overloaded" ||
					a[attribute.Key("gen_ai.request.max_tokens")].AsInt64() != 300 || s.Status.Code.String() != "Error" {
					t.Errorf("primary attempt %d: %s %v status %v", i, s.Name, a, s.Status)
				}
				if rc, ok := a[attribute.Key("http.request.resend_count")]; (i == 0) == ok || ok && rc.AsInt64() != int64(i) {
					t.Errorf("attempt %d resend count %v (present %v)", i, rc.AsInt64(), ok)
				}
			}
		}
		served := attrs(spans[3].Attributes)
		if spans[3].Name != "chat "+haiku || served[attribute.Key("gen_ai.response.model")].AsString() != haiku+"-20261101" ||
			served[attribute.Key("backstop.request_id")].AsString() != "req_served" || served[attribute.Key("gen_ai.usage.input_tokens")].AsInt64() != 12 ||
			served[attribute.Key("gen_ai.usage.output_tokens")].AsInt64() != 3 || served[attribute.Key("backstop.tier")].AsString() != "sibling" ||
			fmt.Sprint(served[attribute.Key("gen_ai.response.finish_reasons")].AsStringSlice()) != "[end_turn]" {
			t.Errorf("served attempt %v", served)
		}

		var retries, fallbacks int
		for _, e := range call.Events {
			a := attrs(e.Attributes)
			switch e.Name {
			case "backstop.retry":
				retries++
				if a[attribute.Key("backstop.target")].AsString() != "sonnet" || a[attribute.Key("backstop.reason")].AsString() != "overloaded" {
					t.Errorf("retry event %v", a)
				}
				if w := a[attribute.Key("backstop.wait")].AsFloat64(); w != res.Attempts[retries].Wait.Seconds() {
					t.Errorf("retry %d waited %v, the result says %v", retries, w, res.Attempts[retries].Wait)
				}
			case "backstop.fallback":
				fallbacks++
				if a[attribute.Key("backstop.from")].AsString() != "sonnet" || a[attribute.Key("backstop.to")].AsString() != "haiku" || a[attribute.Key("backstop.reason")].AsString() != "overloaded" {
					t.Errorf("fallback event %v", a)
				}
			}
		}
		if retries != 2 || fallbacks != 1 {
			t.Fatalf("%d retry and %d fallback events, want 2 and 1", retries, fallbacks)
		}

		m := tel.Metrics(t)
		if n := sumOf(t, m["backstop.calls"], attribute.Key("backstop.outcome").String("served"), attribute.Key("backstop.served.tier").String("sibling")); n != 1 {
			t.Errorf("calls served by the sibling: %d", n)
		}
		if n := sumOf(t, m["backstop.attempts"], attribute.Key("backstop.target").String("sonnet"), attribute.Key("backstop.outcome").String("overloaded")); n != 3 {
			t.Errorf("overloaded attempts on sonnet: %d", n)
		}
		if n := sumOf(t, m["backstop.retries"], attribute.Key("backstop.target").String("sonnet")); n != 2 {
			t.Errorf("retries: %d", n)
		}
		if n := sumOf(t, m["backstop.fallbacks"], attribute.Key("backstop.from").String("sonnet")); n != 1 {
			t.Errorf("fallbacks: %d", n)
		}
		if h := m["gen_ai.client.operation.duration"].(metricdata.Histogram[float64]); len(h.DataPoints) != 2 {
			t.Errorf("operation duration points: %d (one per model and outcome)", len(h.DataPoints))
		}
		tokens := m["gen_ai.client.token.usage"].(metricdata.Histogram[int64])
		var in, out int64
		for _, p := range tokens.DataPoints {
			if v, _ := p.Attributes.Value(attribute.Key("gen_ai.token.type")); v.AsString() == "input" {
				in += p.Sum
			} else {
				out += p.Sum
			}
		}
		if in != 12 || out != 3 {
			t.Errorf("token usage in %d out %d", in, out)
		}
		rpc := m["backstop.call.retries"].(metricdata.Histogram[int64])
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
		if len(call.Events) == 0 || call.Events[0].Name != "backstop.breaker.rejected" {
			t.Fatalf("events %v", call.Events)
		}
		if n := sumOf(t, tel.Metrics(t)["backstop.breaker.changes"], attribute.Key("backstop.target").String("sonnet"), attribute.Key("backstop.breaker.state").String("open")); n != 1 {
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
			if strings.HasPrefix(s.Name, "backstop.call ") {
				call = s
				continue
			}
			byTarget[attrs(s.Attributes)[attribute.Key("backstop.target")].AsString()] = s
		}
		lost, won := byTarget["eu-1"], byTarget["eu-2"]
		la, wa := attrs(lost.Attributes), attrs(won.Attributes)
		if la[attribute.Key("backstop.spread.strategy")].AsString() != "weighted" || la[attribute.Key("backstop.spread.choice")].AsString() != "weighted 1/2: weight 1000000000 of 1000000001" {
			t.Errorf("the first attempt's choice: %v %v", la[attribute.Key("backstop.spread.strategy")], la[attribute.Key("backstop.spread.choice")])
		}
		if !la[attribute.Key("backstop.hedge.lost")].AsBool() || lost.Status.Code == codes.Error {
			t.Errorf("the loser: lost %v, status %v; want lost and no error", la[attribute.Key("backstop.hedge.lost")], lost.Status)
		}
		if !wa[attribute.Key("backstop.hedge")].AsBool() || wa[attribute.Key("backstop.hedge.of")].AsString() != "eu-1" || wa[attribute.Key("backstop.hedge.delay")].AsFloat64() != 1 ||
			wa[attribute.Key("backstop.request_id")].AsString() != "req_fast" || wa[attribute.Key("backstop.spread.choice")].AsString() != "weighted 2/2: weight 1" {
			t.Errorf("the hedge's span: %v", wa)
		}
		var hedges int
		for _, e := range call.Events {
			if e.Name == "backstop.hedge" {
				hedges++
				if ea := attrs(e.Attributes); ea[attribute.Key("backstop.from")].AsString() != "eu-1" || ea[attribute.Key("backstop.to")].AsString() != "eu-2" {
					t.Errorf("hedge event %v", ea)
				}
			}
		}
		if hedges != 1 {
			t.Errorf("%d hedge events on the call span; want 1", hedges)
		}
		m := tel.Metrics(t)
		if n := sumOf(t, m["backstop.hedges"], attribute.Key("backstop.target").String("eu-2")); n != 1 {
			t.Errorf("backstop.hedges = %d; want 1", n)
		}
		if n := sumOf(t, m["backstop.attempts"], attribute.Key("backstop.outcome").String("lost")); n != 1 {
			t.Errorf("attempts lost = %d; want 1", n)
		}
	})
}

// TestTraceOfAReaskSaysWhatItCost: the answer that failed the schema was
// billed; the trace says so on its attempt span, and the call span's cost
// is Result.Cost() with the re-ask's as its overhead; the cost counter
// has it by target and the caller's budget key.
func TestTraceOfAReaskSaysWhatItCost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tel := oteltest.New()
		f := fake.New()
		c, err := chain.New("support").Schema(answerSchema).TracerProvider(tel.TracerProvider).MeterProvider(tel.MeterProvider).
			Primary(chain.Target{Name: "sonnet", Provider: claude(t, f), Model: sonnet, Price: catalog.Price{Input: 3, Output: 15}}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		f.Script(sonnet, fake.Answer(bad).Usage(1000, 100), fake.Answer(good).Usage(1200, 80))
		res, err := c.Call(cost.WithKey(t.Context(), "tenant-7"), ask)
		if err != nil {
			t.Fatal(err)
		}
		reask, answer := cost.Dollars(1000*3e-6+100*15e-6), cost.Dollars(1200*3e-6+80*15e-6)
		if len(res.Attempts) != 2 || res.Attempts[0].Cost.Spent != reask || res.Attempts[1].Cost.Spent != answer {
			t.Fatalf("attempts %v", res.Attempts)
		}
		spans := tel.Spans.GetSpans()
		if len(spans) != 3 {
			t.Fatalf("%d spans, want 3", len(spans))
		}
		for i, want := range []cost.Money{reask, answer} {
			if got := attrs(spans[i].Attributes)["backstop.cost"].AsFloat64(); got != want.Dollars() {
				t.Errorf("attempt %d: backstop.cost %v, want %v", i+1, got, want.Dollars())
			}
		}
		call := attrs(spans[2].Attributes)
		if got := call["backstop.cost"].AsFloat64(); got != res.Cost().Spent.Dollars() || got != (reask+answer).Dollars() {
			t.Errorf("call span backstop.cost %v, Result.Cost %v", got, res.Cost())
		}
		if got := call["backstop.cost.overhead"].AsFloat64(); got != reask.Dollars() {
			t.Errorf("call span backstop.cost.overhead %v, want the re-asked answer's %v", got, reask.Dollars())
		}
		if call["backstop.budget.key"].AsString() != "tenant-7" {
			t.Errorf("call span budget key %v", call["backstop.budget.key"])
		}
		s, ok := tel.Metrics(t)["backstop.cost"].(metricdata.Sum[float64])
		if !ok || len(s.DataPoints) != 1 {
			t.Fatalf("backstop.cost points: %+v", s)
		}
		p := s.DataPoints[0]
		if k, _ := p.Attributes.Value("backstop.budget.key"); k.AsString() != "tenant-7" || cost.Dollars(p.Value) != reask+answer {
			t.Errorf("backstop.cost point %v = %v, want tenant-7 and %v", p.Attributes, p.Value, (reask + answer).Dollars())
		}
	})
}

package chain_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/spend"
)

// worstOf is the worst case of question on a target at price p.
func worstOf(p catalog.Price) cost.Money { return cost.WorstCase(&question, p, 0).Spent }

func newBudget(t testing.TB, c spend.Config) *spend.Budget {
	t.Helper()
	b, err := spend.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pricedChain is a chain of a dear primary and a cheap fallback, each
// answering with usage u, with budgets b and then the degradations ds.
func pricedChain(t *testing.T, u llm.Usage, b *spend.Budget, ds ...degrade.Degradation) (*chain.Chain, *stub, *stub) {
	t.Helper()
	p, f := &stub{name: "a", fn: used(u)}, &stub{name: "b", fn: used(u)}
	bl := chain.New("c").Spend(b).
		Primary(chain.Target{Name: "dear", Provider: p, Model: "m1", Price: dear}).
		OrProvider(chain.Target{Name: "cheap", Provider: f, Model: "m2", Price: cheap})
	for _, d := range ds {
		bl.OrDegrade(d)
	}
	c, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c, p, f
}

// TestSpendDegradeSkipsATargetItCannotCover: a budget between the cheap
// target's worst case and the dear one's passes the dear one over, with a
// record and a Skip event saying why, and the cheap one answers.
func TestSpendDegradeSkipsATargetItCannotCover(t *testing.T) {
	u := llm.Usage{InputTokens: 5, OutputTokens: 20}
	b := newBudget(t, spend.Config{Name: "quota", Limit: worstOf(dear) - 1})
	var skips []observe.Skip
	c, _, _ := pricedChain(t, u, b)
	c2, err := chain.New("c2").Spend(b).Observe(&observe.Funcs{OnSkip: func(e observe.Skip) { skips = append(skips, e) }}).
		Primary(chain.Target{Name: "dear", Provider: &stub{name: "a", fn: used(u)}, Model: "m1", Price: dear}).
		OrProvider(chain.Target{Name: "cheap", Provider: &stub{name: "b", fn: used(u)}, Model: "m2", Price: cheap}).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := cost.WithKey(t.Context(), "acme")
	for _, c := range []*chain.Chain{c, c2} {
		res, err := c.Call(ctx, question)
		if err != nil || res.Served.Target != "cheap" || len(res.Attempts) != 2 {
			t.Fatalf("%v\n%s", err, lines(res))
		}
		skip := res.Attempts[0]
		var e *spend.ExceededError
		if skip.Target != "dear" || skip.Decision != chain.DecisionSkip || !errors.As(skip.Err, &e) || e.Need != worstOf(dear) || e.Key != "acme" ||
			!strings.HasPrefix(skip.Reason, `budget quota for "acme": `) {
			t.Fatalf("the skip: %+v", skip)
		}
	}
	if len(skips) != 1 || skips[0].Cause != observe.SkipSpend || skips[0].Target.Name != "dear" || !errors.Is(skips[0].Err, spend.ErrExceeded) {
		t.Fatalf("skip events %+v", skips)
	}
	spent, reserved, _ := b.Used(ctx, "acme")
	if want := 2 * cost.Of(u, cheap).Spent; spent != want || reserved != 0 {
		t.Fatalf("spent %v reserved %v; want %v, nothing reserved", spent, reserved, want)
	}
}

// TestSpendRefuseEndsTheCall: a Refuse budget that cannot cover the
// primary ends the call with its *ExceededError: the cheap fallback and
// the degradation are not tried, and VerdictOf says 429.
func TestSpendRefuseEndsTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, spend.Config{Name: "quota", Limit: worstOf(dear) - 1, Mode: spend.Refuse})
		c, _, f := pricedChain(t, llm.Usage{InputTokens: 5, OutputTokens: 20}, b, degrade.Static(llm.Response{Text: "later"}))
		f.fn = func(context.Context, llm.Request) (*llm.Response, error) {
			t.Error("the fallback was tried")
			return nil, errors.New("tried")
		}
		res, err := c.Call(t.Context(), question)
		var e *spend.ExceededError
		if !errors.As(err, &e) || res.Degraded || len(res.Attempts) != 1 || res.Attempts[0].Decision != chain.DecisionSkip {
			t.Fatalf("%v\n%s", err, lines(res))
		}
		v := chain.VerdictOf(err)
		if v != retry.VerdictOverBudget || v.HTTPStatus() != 429 || e.Reset != time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC) {
			t.Errorf("verdict %v (%d), reset %v", v, v.HTTPStatus(), e.Reset)
		}
	})
}

// TestSpendABudgetOfExactlyOneCall: the first call fits, the second does
// not: degraded with Degrade, refused with Refuse, and an exhausted call
// of Degrade is 429 too.
func TestSpendABudgetOfExactlyOneCall(t *testing.T) {
	u := llm.Usage{InputTokens: 5, OutputTokens: 20}
	for _, mode := range []spend.Mode{spend.Degrade, spend.Refuse} {
		b := newBudget(t, spend.Config{Name: "one", Limit: worstOf(dear), Mode: mode})
		p := &stub{name: "a", fn: used(u)}
		c, err := chain.New("c").Spend(b).Primary(chain.Target{Name: "dear", Provider: p, Model: "m1", Price: dear}).
			OrDegrade(degrade.Static(llm.Response{Text: "later"})).Build()
		if err != nil {
			t.Fatal(err)
		}
		if res, err := c.Call(t.Context(), question); err != nil || res.Degraded {
			t.Fatalf("%v: the one call: %v %+v", mode, err, res.Served)
		}
		res, err := c.Call(t.Context(), question)
		switch mode {
		case spend.Degrade:
			if err != nil || !res.Degraded || !errors.Is(res.Attempts[0].Err, spend.ErrExceeded) {
				t.Fatalf("degrade: %v\n%s", err, lines(res))
			}
		case spend.Refuse:
			if !errors.Is(err, spend.ErrExceeded) || res.Degraded || chain.VerdictOf(err) != retry.VerdictOverBudget {
				t.Fatalf("refuse: %v\n%s", err, lines(res))
			}
		}
	}
	b := newBudget(t, spend.Config{Name: "one", Limit: worstOf(dear)})
	c, err := chain.New("c").Spend(b).Primary(chain.Target{Name: "dear", Provider: &stub{name: "a", fn: used(u)}, Model: "m1", Price: dear}).Build()
	if err != nil {
		t.Fatal(err)
	}
	c.Call(t.Context(), question)
	_, err = c.Call(t.Context(), question)
	if !errors.Is(err, chain.ErrExhausted) || chain.VerdictOf(err) != retry.VerdictOverBudget {
		t.Fatalf("degrade without a degradation: %v, verdict %v", err, chain.VerdictOf(err))
	}
}

// TestSpendRefusesARetry: a retry the budget cannot cover is not sent;
// with Refuse the call ends there.
func TestSpendRefusesARetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newBudget(t, spend.Config{Name: "q", Limit: worstOf(dear) + worstOf(dear)/2, Mode: spend.Refuse})
		calls := 0
		p := &stub{name: "a", fn: func(context.Context, llm.Request) (*llm.Response, error) {
			calls++
			return &llm.Response{Text: "partial", Usage: llm.Usage{InputTokens: 5, OutputTokens: 99}}, &llm.Error{Provider: "a", Status: 500, Kind: llm.KindServer}
		}}
		f := &stub{name: "b", fn: used(llm.Usage{InputTokens: 5, OutputTokens: 1})}
		c, err := chain.New("c").Spend(b).
			Primary(chain.Target{Name: "dear", Provider: p, Model: "m1", Price: dear, Retry: retry.Policy{MaxAttempts: 3}}).
			OrProvider(chain.Target{Name: "cheap", Provider: f, Model: "m2", Price: cheap}).Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		if calls != 1 || !errors.Is(err, spend.ErrExceeded) || chain.VerdictOf(err) != retry.VerdictOverBudget {
			t.Fatalf("%d sent: %v\n%s", calls, err, lines(res))
		}
		if last := res.Attempts[len(res.Attempts)-1]; last.Decision != chain.DecisionSkip || last.N != 2 {
			t.Fatalf("the retry's record: %+v", last)
		}
	})
}

// TestSpendRefusesAHedge: a budget that covers one attempt only lets the
// hedge go unsent, recorded as a skip (not a hedge), and the primary
// answers.
func TestSpendRefusesAHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, mode := range []spend.Mode{spend.Degrade, spend.Refuse} {
			slow := &timed{name: "eu-1", delay: 2 * time.Second}
			other := &timed{name: "eu-2", delay: 100 * time.Millisecond}
			b := newBudget(t, spend.Config{Name: "q", Limit: worstOf(dear), Mode: mode})
			c := deployments(t, func(b2 *chain.Builder) { b2.Hedge(hedge.Config{Delay: time.Second}).Spend(b) },
				func(t *chain.Target) { t.Price = dear }, slow, other)
			res, err := c.Call(t.Context(), question)
			if err != nil || res.Served.Target != "eu-1" || other.count() != 0 || len(res.Attempts) != 2 {
				t.Fatalf("%v: %v, %d hedges sent\n%s", mode, err, other.count(), lines(res))
			}
			skip := res.Attempts[0]
			if skip.Target != "eu-2" || skip.Decision != chain.DecisionSkip || skip.Hedge || !errors.Is(skip.Err, spend.ErrExceeded) ||
				!strings.HasPrefix(skip.Reason, "not sent as a racer: budget q") {
				t.Fatalf("%v: the hedge's record %+v", mode, skip)
			}
			if _, reserved, _ := b.Used(t.Context(), ""); reserved != 0 {
				t.Errorf("%v: %v still reserved", mode, reserved)
			}
		}
	})
}

// TestSpendSettlesALostRacer: a hedge that lost its race cost what the
// provider read of it, and the budget counts it: the key's spend is the
// call's cost.
func TestSpendSettlesALostRacer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &timed{name: "eu-1", delay: 8 * time.Second}
		fast := &timed{name: "eu-2", delay: 300 * time.Millisecond}
		b := newBudget(t, spend.Config{Name: "q", Limit: cost.Dollar})
		c := deployments(t, func(b2 *chain.Builder) { b2.Hedge(hedge.Config{Delay: time.Second}).Spend(b) },
			func(t *chain.Target) { t.Price = dear }, slow, fast)
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Attempts[0].Decision != chain.DecisionLost || res.Attempts[0].Cost.Spent == 0 {
			t.Fatalf("%v\n%s", err, lines(res))
		}
		spent, reserved, _ := b.Used(t.Context(), "")
		if spent != res.Cost().Spent || reserved != 0 {
			t.Fatalf("spent %v, reserved %v; the call cost %v", spent, reserved, res.Cost())
		}
	})
}

// TestSpendSettlesAStreamCutAfterOutput: the output a cut stream had sent
// is billed, and spent.
func TestSpendSettlesAStreamCutAfterOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cut := &streamer{stub: stub{name: "a"}, chunks: []string{"0123456789abcdef", "0123456789abcdef", "x"}, failAt: 2}
		b := newBudget(t, spend.Config{Name: "q", Limit: cost.Dollar})
		c, err := chain.New("c").Spend(b).
			Primary(chain.Target{Name: "p", Provider: cut, Model: "m", Price: dear, Retry: retry.Policy{MaxAttempts: 1}}).Build()
		if err != nil {
			t.Fatal(err)
		}
		s := c.Stream(t.Context(), question)
		if _, err := collect(t, s); !errors.Is(err, chain.ErrIncomplete) {
			t.Fatalf("stream ended with %v", err)
		}
		res, _ := s.Result()
		spent, reserved, _ := b.Used(t.Context(), "")
		if want := cost.Dollars(8 * 25e-6); spent != want || res.Cost().Spent != want || reserved != 0 {
			t.Fatalf("spent %v, reserved %v, the call cost %v; want %v", spent, reserved, res.Cost(), want)
		}
	})
}

// TestSpendUnknownPrice: a target without a price (nor a catalogue entry)
// is reserved nothing and counted at nothing by default; a StrictPrices
// budget passes it over for a priced one.
func TestSpendUnknownPrice(t *testing.T) {
	u := llm.Usage{InputTokens: 5, OutputTokens: 20}
	empty, err := catalog.New()
	if err != nil {
		t.Fatal(err)
	}
	for _, strict := range []bool{false, true} {
		b := newBudget(t, spend.Config{Name: "q", Limit: cost.Dollar, Mode: spend.Refuse, StrictPrices: strict})
		c, err := chain.New("c").Spend(b).Catalog(empty).
			Primary(chain.Target{Name: "free?", Provider: &stub{name: "a", fn: used(u)}, Model: "m1"}).
			OrProvider(chain.Target{Name: "cheap", Provider: &stub{name: "b", fn: used(u)}, Model: "m2", Price: cheap}).Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		spent, reserved, _ := b.Used(t.Context(), "")
		switch {
		case err != nil || reserved != 0:
			t.Fatalf("strict %v: %v, %v reserved", strict, err, reserved)
		case !strict && (res.Served.Target != "free?" || spent != 0 || !res.Cost().Unpriced):
			t.Errorf("lax: served by %s, spent %v, cost %v", res.Served.Target, spent, res.Cost())
		case strict && (res.Served.Target != "cheap" || !errors.Is(res.Attempts[0].Err, spend.ErrUnpriced) || spent != cost.Of(u, cheap).Spent):
			t.Errorf("strict: served by %s, spent %v\n%s", res.Served.Target, spent, lines(res))
		}
	}
}

// TestSpendUnderConcurrency: 200 goroutines of calls race for one key's
// limit through a chain; the spend stays within it (no answer costs more
// than its worst case here), every reservation is settled, and the calls
// past it are degraded.
func TestSpendUnderConcurrency(t *testing.T) {
	u := llm.Usage{InputTokens: 5, OutputTokens: 60}
	b := newBudget(t, spend.Config{Name: "q", Limit: 50 * worstOf(dear)})
	c, _, _ := pricedChain(t, u, b, degrade.Static(llm.Response{Text: "later"}))
	ctx := cost.WithKey(t.Context(), "tenant")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total cost.Money
	degraded := 0
	for range 200 {
		wg.Go(func() {
			for range 5 {
				res, err := c.Call(ctx, question)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				total += res.Cost().Spent
				if res.Degraded {
					degraded++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	spent, reserved, _ := b.Used(ctx, "tenant")
	if spent != total || reserved != 0 || spent > 50*worstOf(dear) {
		t.Fatalf("spent %v (calls' cost %v), reserved %v, limit %v", spent, total, reserved, 50*worstOf(dear))
	}
	if degraded == 0 || degraded == 1000 {
		t.Errorf("%d of 1000 calls degraded", degraded)
	}
}

func TestSpendBuildRefusesANilOrRepeatedBudget(t *testing.T) {
	b := newBudget(t, spend.Config{Name: "q", Limit: cost.Dollar})
	_, err := chain.New("c").Spend(b, nil, b).Primary(chain.Target{Name: "p", Provider: &stub{name: "a"}, Model: "m"}).Build()
	if !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), "nil budget (#1)") || !strings.Contains(err.Error(), "same budget twice (#2)") {
		t.Fatalf("%v", err)
	}
}

// BenchmarkSpend is a healthy call without a budget and with an
// in-process one, in interleaved blocks of spendBlock calls (whatever
// slows the machine for a while falls on both alike): its "ratio" is the
// budgeted call's time over the plain one's, what the reservation and its
// settlement add (the ceiling: 1.3). ns/op is per block of both.
func BenchmarkSpend(b *testing.B) {
	p := &healthyProvider{resp: llm.Response{Text: "ok", Model: "m", Usage: llm.Usage{InputTokens: 10, OutputTokens: 20}}}
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}, Params: llm.Params{MaxTokens: 100}}
	ctx, cancel := context.WithTimeout(cost.WithKey(context.Background(), "tenant"), time.Minute)
	defer cancel()
	var chains [2]*chain.Chain
	for i := range chains {
		bl := chain.New("bench").Primary(chain.Target{Name: "p", Provider: p, Model: "m", Price: cheap})
		if i == 1 {
			bl.Spend(newBudget(b, spend.Config{Name: "q", Limit: cost.Money(1 << 62)}))
		}
		c, err := bl.Build()
		if err != nil {
			b.Fatal(err)
		}
		chains[i] = c
	}
	const spendBlock = 100
	var spent [2]time.Duration
	b.ReportAllocs()
	for b.Loop() {
		for i, c := range chains {
			start := time.Now()
			for range spendBlock {
				if _, err := c.Call(ctx, req); err != nil {
					b.Fatal(err)
				}
			}
			spent[i] += time.Since(start)
		}
	}
	n := float64(b.N * spendBlock)
	b.ReportMetric(float64(spent[0])/n, "ns/plain")
	b.ReportMetric(float64(spent[1])/n, "ns/budgeted")
	b.ReportMetric(float64(spent[1])/float64(spent[0]), "ratio")
}

// TestSpendRefusalIsNamedInTelemetry: a call a budget refused ends with
// the error type "over_budget", not "unknown", so a dashboard can tell
// money from failures.
func TestSpendRefusalIsNamedInTelemetry(t *testing.T) {
	var got observe.CallEnd
	b := newBudget(t, spend.Config{Name: "quota", Limit: 1, Mode: spend.Refuse})
	c, err := chain.New("c").Spend(b).Observe(&observe.Funcs{OnCallEnd: func(e observe.CallEnd) { got = e }}).
		Primary(chain.Target{Name: "dear", Provider: &stub{name: "a"}, Model: "m1", Price: dear}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(t.Context(), question); !errors.Is(err, spend.ErrExceeded) {
		t.Fatalf("err = %v", err)
	}
	if got.Outcome != "failed" || got.ErrorType != "over_budget" {
		t.Errorf("call end: outcome %q, error type %q; want failed, over_budget", got.Outcome, got.ErrorType)
	}
}

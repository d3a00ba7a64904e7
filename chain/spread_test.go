package chain_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/spread"
	"github.com/backstop-llm/backstop/throttle"
)

// deployments builds a chain over one model on the providers given, in
// order (the primary, then other deployments), set up by setup; each
// target is changed by target when it is not nil.
func deployments(t *testing.T, setup func(*chain.Builder), target func(*chain.Target), ps ...llm.Provider) *chain.Chain {
	t.Helper()
	b := chain.New("tier")
	setup(b)
	for i, p := range ps {
		tg := chain.Target{Name: p.Name(), Provider: p, Model: "sonnet-5", Retry: retry.Policy{MaxAttempts: 2}}
		if target != nil {
			target(&tg)
		}
		if i == 0 {
			b.Primary(tg)
		} else {
			b.OrDeployment(tg)
		}
	}
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// weights gives each target the weight its name has in w.
func weights(w map[string]float64) func(*chain.Target) {
	return func(t *chain.Target) { t.Weight = w[t.Name] }
}

// spreading sets up a chain to spread with s.
func spreading(s spread.Strategy) func(*chain.Builder) {
	return func(b *chain.Builder) { b.Spread(s) }
}

func TestSpreadWeightedSharesTheCallsByWeight(t *testing.T) {
	a, b, c := &timed{name: "eu-1"}, &timed{name: "eu-2"}, &timed{name: "eu-3"}
	ch := deployments(t, spreading(spread.Weighted), weights(map[string]float64{"eu-1": 1, "eu-2": 2, "eu-3": 1}), a, b, c)
	const calls = 4000
	for range calls {
		res, err := ch.Call(t.Context(), question)
		if err != nil {
			t.Fatal(err)
		}
		ch := res.Attempts[0].Choice
		if ch == nil || ch.Strategy != spread.Weighted || ch.Rank != 1 || ch.Of != 3 || ch.AgainstFigure != 4 {
			t.Fatalf("choice %+v", ch)
		}
	}
	for _, x := range []struct {
		p    *timed
		want float64
	}{{a, 0.25}, {b, 0.5}, {c, 0.25}} {
		// 4000 draws: the standard deviation of a share of 0.5 is 0.008.
		if got := float64(x.p.count()) / calls; got < x.want-0.04 || got > x.want+0.04 {
			t.Errorf("%s got %.3f of the calls; want %.2f", x.p.name, got, x.want)
		}
	}
}

func TestSpreadLeastLoadedSendsToTheTargetWithFewerInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		busy := &timed{name: "eu-1", release: make(chan struct{})}
		idle := &timed{name: "eu-2"}
		c := deployments(t, spreading(spread.LeastLoaded), nil, busy, idle)
		// Hold a call on eu-1 (calls drawn to eu-2 meanwhile end at once):
		// the other target then has none in flight.
		var wg sync.WaitGroup
		for busy.count() < 1 {
			wg.Go(func() { _, _ = c.Call(t.Context(), question) })
			synctest.Wait()
		}
		before := idle.count()
		for range 20 {
			res, err := c.Call(t.Context(), question)
			if err != nil || res.Served.Target != "eu-2" {
				t.Fatalf("served by %q (%v); want eu-2, the target with nothing in flight", res.Served.Target, err)
			}
			ch := res.Attempts[0].Choice
			if ch.Strategy != spread.LeastLoaded || ch.Figure != 0 || ch.Against != "eu-1" || ch.AgainstFigure < 1 {
				t.Fatalf("choice %+v (%s); want 0 in flight against eu-1's", ch, ch)
			}
		}
		if idle.count()-before != 20 {
			t.Fatalf("eu-2 got %d requests; want 20", idle.count()-before)
		}
		close(busy.release)
		wg.Wait()
	})
}

func TestSpreadLatencyAvoidsTheSlowTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow, fast := &timed{name: "slow", delay: 2 * time.Second}, &timed{name: "fast", delay: 200 * time.Millisecond}
		c := deployments(t, spreading(spread.Latency), nil, slow, fast)
		for range 100 {
			if _, err := c.Call(t.Context(), question); err != nil {
				t.Fatal(err)
			}
		}
		// Once each has been sampled, the slow one is tried again only
		// when its latency has decayed below the fast one's.
		if slow.count() > 10 {
			t.Fatalf("slow target got %d of 100 calls, fast %d", slow.count(), fast.count())
		}
	})
}

func TestSpreadRetriesOnAnotherTargetOfTheTierFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := &stub{name: "eu-1", fn: fail(llm.KindOverloaded, 529)}
		up := &timed{name: "eu-2"}
		c := deployments(t, spreading(spread.Weighted), weights(map[string]float64{"eu-1": 1e9, "eu-2": 1}), down, up) // eu-1 is drawn first
		start := time.Now()
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "eu-2" {
			t.Fatalf("%v %+v", err, res.Served)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("the call waited %v; the other target needs no backoff", waited)
		}
		first := res.Attempts[0]
		if first.Target != "eu-1" || first.Decision != chain.DecisionNext || !strings.Contains(first.Reason, "another deployment target first") {
			t.Fatalf("first attempt %v", first)
		}
		if second := res.Attempts[1]; second.Choice == nil || second.Choice.Rank != 2 {
			t.Fatalf("second attempt %v", second)
		}
	})
}

func TestSpreadRetriesInPlaceOnceEveryTargetWasTried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		flaky := &stub{name: "eu-2", fn: func(_ context.Context, req llm.Request) (*llm.Response, error) {
			if n++; n == 1 {
				return nil, &llm.Error{Provider: "eu-2", Status: 529, Kind: llm.KindOverloaded}
			}
			return &llm.Response{Text: "ok"}, nil
		}}
		c := deployments(t, spreading(spread.Weighted), weights(map[string]float64{"eu-1": 1e9, "eu-2": 1}), &stub{name: "eu-1", fn: fail(llm.KindOverloaded, 529)}, flaky)
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "eu-2" || len(res.Attempts) != 3 || res.Attempts[1].Decision != chain.DecisionRetry {
			t.Fatalf("%v\n%s", err, lines(res))
		}
	})
}

func TestSpreadBuildProblems(t *testing.T) {
	p := &stub{name: "x"}
	for _, tc := range []struct {
		name string
		b    *chain.Builder
		says string
	}{
		{"degrade tier", chain.New("c").Spread(spread.LeastLoaded, chain.TierDegrade).Primary(chain.Target{Name: "p", Provider: p, Model: "m"}), "name a model tier"},
		{"unknown strategy", chain.New("c").Spread(spread.Strategy(42)).Primary(chain.Target{Name: "p", Provider: p, Model: "m"}), "use one of spread.Ordered"},
		{"negative weight", chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m", Weight: -1}), "Weight is -1"},
	} {
		t.Run(tc.name, func(t *testing.T) { wantBuildErr(t, tc.b, tc.says) })
	}
}

// Found in review: a tier of more than eight targets (past what a walk
// ranks on its stack) panicked on every call, whatever the strategy.
func TestSpreadOverATierOfMoreThanEightTargets(t *testing.T) {
	for _, s := range []spread.Strategy{spread.Weighted, spread.LeastLoaded, spread.Latency, spread.Headroom} {
		t.Run(s.String(), func(t *testing.T) {
			ps := make([]llm.Provider, 10)
			for i := range ps {
				ps[i] = &timed{name: fmt.Sprintf("eu-%d", i+1)}
			}
			ch := deployments(t, spreading(s), nil, ps...)
			for range 20 {
				res, err := ch.Call(t.Context(), question)
				if err != nil {
					t.Fatal(err)
				}
				if c := res.Attempts[0].Choice; c == nil || c.Strategy != s || c.Rank != 1 || c.Of != 10 {
					t.Fatalf("choice %+v", c)
				}
			}
		})
	}
}

// Found in review: a provider that panicked left its attempt counted in
// flight for good, so LeastLoaded passed its target over ever after.
func TestSpreadAProviderPanicEndsItsCountInFlight(t *testing.T) {
	a, b := &panicsOnce{timed: timed{name: "eu-1"}}, &timed{name: "eu-2"}
	ch := deployments(t, spreading(spread.LeastLoaded), nil, a, b)
	for !a.panicked.Load() { // until eu-1 is tried first, and panics
		func() {
			defer func() { _ = recover() }()
			_, _ = ch.Call(t.Context(), question)
		}()
	}
	before := a.count()
	for range 40 {
		if _, err := ch.Call(t.Context(), question); err != nil {
			t.Fatal(err)
		}
	}
	if got := a.count() - before; got < 5 {
		t.Fatalf("eu-1 got %d of 40 calls after its panic; want about half", got)
	}
}

// TestSpreadHealthyCallAllocations guards a spreading chain's healthy
// path: ranking a tier of up to eight targets (in the walk's own arrays)
// allocates nothing beyond what a chain of two tiers' call takes (its
// result, which holds the first Choice, and the patience race, as
// TestHealthyCallAllocations counts them); a longer chain's ranking takes
// three more (its slots, and the tier's order and figures), the strategies
// that compare candidates one more for them.
func TestSpreadHealthyCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes what allocates; run without -race")
	}
	p := &healthyProvider{resp: llm.Response{Text: "ok", Model: "sonnet-5"}}
	dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, tc := range []struct {
		s        spread.Strategy
		few, ten float64 // at most, over 3 targets and over 10
	}{
		{spread.Weighted, 6, 9},
		{spread.LeastLoaded, 6, 9},
		{spread.Latency, 6, 10},  // its candidates, past eight
		{spread.Headroom, 7, 12}, // the throttle's slot; its candidates, past eight
	} {
		for _, n := range []int{3, 10} {
			ps := make([]llm.Provider, n)
			for i := range ps {
				ps[i] = p
			}
			k := 0
			c := deployments(t, spreading(tc.s), func(tg *chain.Target) {
				k++
				tg.Name = fmt.Sprintf("eu-%d", k)
				if tc.s == spread.Headroom {
					tg.Throttle = throttle.Config{RequestsPerMinute: 1e9} // room for every call
				}
			}, ps...)
			allocs := testing.AllocsPerRun(200, func() {
				if res, err := c.Call(dctx, question); err != nil || res.Text != "ok" || res.Attempts[0].Choice == nil {
					t.Fatalf("%v", err)
				}
			})
			t.Logf("%s over %d targets: %.1f allocations", tc.s, n, allocs)
			if max := map[bool]float64{true: tc.few, false: tc.ten}[n <= 8]; allocs > max {
				t.Errorf("a healthy call spread by %s over %d targets allocates %.0f times; at most %.0f", tc.s, n, allocs, max)
			}
		}
	}
}

// TestSpreadChoiceNamesTheRunnerUp: the first target's Choice names the
// target it was preferred to with that target's figure, which is the
// target the call goes to next, ranked 2 by that figure.
func TestSpreadChoiceNamesTheRunnerUp(t *testing.T) {
	for _, s := range []spread.Strategy{spread.LeastLoaded, spread.Latency, spread.Headroom} {
		t.Run(s.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ps := make([]llm.Provider, 3)
				for i := range ps {
					ps[i] = &stub{name: fmt.Sprintf("eu-%d", i+1), fn: fail(llm.KindOverloaded, 529)}
				}
				c := deployments(t, spreading(s), nil, ps...)
				for range 20 {
					res, _ := c.Call(t.Context(), question)
					first, second := res.Attempts[0], res.Attempts[1]
					if first.Choice == nil || second.Choice == nil || first.Choice.Rank != 1 || second.Choice.Rank != 2 {
						t.Fatalf("%s", lines(res))
					}
					if first.Choice.Against != second.Target || first.Choice.AgainstFigure != second.Choice.Figure || first.Target == second.Target {
						t.Fatalf("first %+v, second %s %+v", first.Choice, second.Target, second.Choice)
					}
				}
			})
		})
	}
}

package chain_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/spread"
	"github.com/backstop-llm/backstop/throttle"
)

// hedged builds a chain of ps, one model on each, hedged with h.
func hedged(t *testing.T, h hedge.Config, ps ...llm.Provider) *chain.Chain {
	t.Helper()
	return deployments(t, func(b *chain.Builder) { b.Hedge(h) },
		func(t *chain.Target) { t.Retry, t.Breaker = retry.Policy{}, breaker.Config{ConsecutiveFailures: 1} }, ps...)
}

func TestHedgeWinsWhenTheAttemptIsSlow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &timed{name: "eu-1", delay: 8 * time.Second}
		fast := &timed{name: "eu-2", delay: 300 * time.Millisecond}
		c := hedged(t, hedge.Config{Delay: time.Second}, slow, fast)
		for range 5 { // the slow target's breaker opens after one failure: losing is none
			start := time.Now()
			res, err := c.Call(t.Context(), question)
			if err != nil || res.Served.Target != "eu-2" || res.Text != "ok from eu-2" {
				t.Fatalf("%v %+v", err, res.Served)
			}
			if took := time.Since(start); took != 1300*time.Millisecond {
				t.Errorf("the call took %v; want the delay and the hedge's 300ms", took)
			}
			lost, won := res.Attempts[0], res.Attempts[1]
			if lost.Target != "eu-1" || lost.Decision != chain.DecisionLost || !errors.Is(lost.Err, chain.ErrLostRace) || lost.Hedge {
				t.Fatalf("loser %v", lost)
			}
			if won.Target != "eu-2" || won.Decision != chain.DecisionServed || !won.Hedge || won.RequestID != "req_eu-2" {
				t.Fatalf("winner %v", won)
			}
		}
		if slow.cancels() != 5 || slow.count() != 5 || fast.count() != 5 {
			t.Fatalf("slow: %d sent, %d canceled; fast: %d sent", slow.count(), slow.cancels(), fast.count())
		}
	})
}

func TestHedgeIsNotSentWhenTheAnswerComesFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &timed{name: "eu-1", delay: 500 * time.Millisecond}
		b := &timed{name: "eu-2", delay: 300 * time.Millisecond}
		c := hedged(t, hedge.Config{Delay: time.Second}, a, b)
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "eu-1" || len(res.Attempts) != 1 || b.count() != 0 {
			t.Fatalf("%v %v; hedge target got %d", err, res.Attempts, b.count())
		}
	})
}

func TestHedgeLoserIsNeitherFailureNorSuccessOfItsBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &timed{name: "eu-1", delay: 8 * time.Second}
		fast := &timed{name: "eu-2", delay: 100 * time.Millisecond}
		var changes []string
		b := chain.New("hedged").Hedge(hedge.Config{Delay: time.Second})
		b.Primary(chain.Target{Name: "eu-1", Provider: slow, Model: "m", Breaker: breaker.Config{ConsecutiveFailures: 1,
			OnStateChange: func(_ string, from, to breaker.State) { changes = append(changes, from.String()+">"+to.String()) }}})
		b.OrDeployment(chain.Target{Name: "eu-2", Provider: fast, Model: "m"})
		c, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			if _, err := c.Call(t.Context(), question); err != nil {
				t.Fatal(err)
			}
		}
		if len(changes) != 0 || slow.count() != 20 {
			t.Fatalf("breaker changes %v after 20 lost races (%d sent); a loser is no failure", changes, slow.count())
		}
	})
}

func TestHedgeBudgetCapsTheHedges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &timed{name: "eu-1", delay: 2 * time.Second}
		slow2 := &timed{name: "eu-2", delay: 2 * time.Second}
		// A window the 100 calls of 2s fit in: with the default 10s one only
		// 5 calls are ever counted and no hedge would be sent at all.
		hb, err := budget.NewRatio(budget.RatioConfig{Ratio: 0.1, MinRetries: -1, Window: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		c := hedged(t, hedge.Config{Delay: 500 * time.Millisecond, Budget: hb}, slow, slow2)
		refused := 0
		for range 100 {
			res, err := c.Call(t.Context(), question)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range res.Attempts {
				if a.Target == "eu-2" && a.Decision == chain.DecisionSkip && errors.Is(a.Err, budget.ErrExhausted) {
					refused++
				}
			}
		}
		if slow2.count() == 0 || slow2.count() > 10 || slow2.count()+refused != 100 {
			t.Fatalf("%d hedges sent, %d refused by the budget, of 100 calls; want at most 10%% sent", slow2.count(), refused)
		}
	})
}

// TestRefusedHedgeIsASkipNotAHedge: a hedge the hedge budget refused is
// recorded as what it is, a request not sent (DecisionSkip, the budget's
// error, a Skip event), never as a hedge: counting the records and the
// events marked Hedge counts the hedges the targets were sent.
func TestRefusedHedgeIsASkipNotAHedge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &timed{name: "eu-1", delay: 2 * time.Second}
		slow2 := &timed{name: "eu-2", delay: 2 * time.Second}
		hb, err := budget.NewRatio(budget.RatioConfig{Ratio: 0.1, MinRetries: -1, Window: time.Hour}) // the whole storm
		if err != nil {
			t.Fatal(err)
		}
		var startsMarkedHedge, budgetSkips int
		obs := &observe.Funcs{
			OnAttemptStart: func(e observe.AttemptStart) {
				if e.Hedge {
					startsMarkedHedge++
				}
			},
			OnSkip: func(e observe.Skip) {
				if e.Target.Name == "eu-2" && e.Cause == observe.SkipBudget && errors.Is(e.Err, budget.ErrExhausted) {
					budgetSkips++
				}
			},
		}
		c := deployments(t, func(b *chain.Builder) { b.Hedge(hedge.Config{Delay: 500 * time.Millisecond, Budget: hb}).Observe(obs) },
			func(t *chain.Target) { t.Retry = retry.Policy{} }, slow, slow2)
		var recordsMarkedHedge, refused int
		for range 100 {
			res, err := c.Call(t.Context(), question)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range res.Attempts {
				if a.Hedge {
					recordsMarkedHedge++
				}
				if a.Decision == chain.DecisionSkip && errors.Is(a.Err, budget.ErrExhausted) {
					refused++
					if a.Target != "eu-2" || a.Hedge || a.Status != 0 || a.Duration != 0 {
						t.Fatalf("a refused hedge's record: %+v\n%s", a, lines(res))
					}
				}
			}
		}
		sent := slow2.count()
		if sent == 0 || refused == 0 || sent+refused != 100 {
			t.Fatalf("%d hedges sent, %d refused, of 100 calls each due one", sent, refused)
		}
		if recordsMarkedHedge != sent || startsMarkedHedge != sent {
			t.Errorf("%d records and %d attempt starts marked Hedge; want the %d hedges sent", recordsMarkedHedge, startsMarkedHedge, sent)
		}
		if budgetSkips != refused {
			t.Errorf("%d Skip events for %d refused hedges", budgetSkips, refused)
		}
	})
}

func TestHedgeIsNotSentToAnOpenBreakerOrPastTheDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &timed{name: "eu-1", delay: 3 * time.Second}
		down := &timed{name: "eu-2", delay: 0, err: &llm.Error{Provider: "eu-2", Status: 500, Kind: llm.KindServer}}
		c := hedged(t, hedge.Config{Delay: time.Second}, slow, down)
		res, err := c.Call(t.Context(), question) // the hedge fails: eu-2's breaker opens
		if err != nil || res.Served.Target != "eu-1" || down.count() != 1 {
			t.Fatalf("%v %v", err, res.Attempts)
		}
		if lost := res.Attempts[0]; lost.Target != "eu-2" || !lost.Hedge || lost.Decision != chain.DecisionLost || lost.Kind != llm.KindServer {
			t.Fatalf("the failed hedge: %v", lost)
		}
		if _, err := c.Call(t.Context(), question); err != nil || down.count() != 1 {
			t.Fatalf("a hedge went to an open breaker: %d requests (%v)", down.count(), err)
		}
		// Past the deadline: a call with 500ms left sends no hedge.
		c2 := hedged(t, hedge.Config{Delay: time.Second}, &timed{name: "a", delay: 3 * time.Second}, &timed{name: "b"})
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		res, _ = c2.Call(ctx, question)
		for _, a := range res.Attempts {
			if a.Hedge {
				t.Fatalf("a hedge was sent past the deadline: %v", a)
			}
		}
	})
}

func TestHedgeAndAttemptBothFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		overloaded := &llm.Error{Provider: "x", Status: 529, Kind: llm.KindOverloaded}
		a := &timed{name: "eu-1", delay: 2 * time.Second, err: overloaded}
		b := &timed{name: "eu-2", delay: 2 * time.Second, err: overloaded}
		c := hedged(t, hedge.Config{Delay: time.Second}, a, b)
		res, err := c.Call(t.Context(), question)
		if !errors.Is(err, chain.ErrExhausted) {
			t.Fatalf("err %v", err)
		}
		// The hedge leaves eu-2, eu-1 is retried in place (the tier is
		// ordered), its breaker then open.
		h := res.Attempts[0]
		if h.Target != "eu-2" || !h.Hedge || h.Decision != chain.DecisionNext || h.Reason != "the hedge failed too" {
			t.Fatalf("%s", lines(res))
		}
		if res.Attempts[1].Target != "eu-1" || res.Attempts[1].Decision == chain.DecisionServed {
			t.Fatalf("%s", lines(res))
		}
		for _, x := range res.Attempts[1:] {
			if x.Target == "eu-2" {
				t.Fatalf("eu-2 was tried again after its hedge failed:\n%s", lines(res))
			}
		}
	})
}

func TestAdaptiveHedgeWaitsForSamplesThenUsesTheQuantile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &timed{name: "eu-1", delay: 200 * time.Millisecond}
		b := &timed{name: "eu-2", delay: 200 * time.Millisecond}
		c := hedged(t, hedge.Config{Adaptive: true}, a, b)
		for range latency.MinSamples {
			if _, err := c.Call(t.Context(), question); err != nil {
				t.Fatal(err)
			}
		}
		if b.count() != 0 {
			t.Fatalf("%d hedges before the tier had %d answers", b.count(), latency.MinSamples)
		}
		a.delay = 5 * time.Second // now slower than every answer so far
		start := time.Now()
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "eu-2" || time.Since(start) != 400*time.Millisecond {
			t.Fatalf("%v, took %v:\n%s", err, time.Since(start), lines(res))
		}
	})
}

func TestHedgeEventsAreObserved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		obs := &observe.Funcs{
			OnAttemptStart: func(e observe.AttemptStart) {
				if e.Hedge {
					got = append(got, "hedge "+e.Target.Name+" of "+e.HedgeOf+" after "+e.HedgeDelay.String())
				}
			},
			OnAttemptEnd: func(e observe.AttemptEnd) {
				if e.Lost {
					got = append(got, "lost "+e.Target.Name)
				}
			},
		}
		b := chain.New("hedged").Hedge(hedge.Config{Delay: time.Second}).Observe(obs)
		b.Primary(chain.Target{Name: "eu-1", Provider: &timed{name: "eu-1", delay: 5 * time.Second}, Model: "m"})
		b.OrDeployment(chain.Target{Name: "eu-2", Provider: &timed{name: "eu-2", delay: 100 * time.Millisecond}, Model: "m"})
		c, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(t.Context(), question); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != "hedge eu-2 of eu-1 after 1s" || got[1] != "lost eu-1" {
			t.Fatalf("events %q", got)
		}
	})
}

func TestStreamHedgeRacesToTheFirstChunk(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &rprov{name: "eu-1", steps: chunks("slow ", "answer"), every: 5 * time.Second}
		fast := &rprov{name: "eu-2", steps: chunks("fast ", "answer"), every: 100 * time.Millisecond}
		c := hedged(t, hedge.Config{Delay: time.Second}, slow, fast)
		chunks, err := collect(t, c.Stream(t.Context(), question))
		if err != nil || texts(chunks) != "fast answer" {
			t.Fatalf("%q %v", texts(chunks), err)
		}
		res, _ := c.Stream(t.Context(), question).Result()
		if res.Served.Target != "eu-2" || res.Text != "fast answer" {
			t.Fatalf("%+v %q\n%s", res.Served, res.Text, lines(res))
		}
		if lost := res.Attempts[0]; lost.Target != "eu-1" || lost.Decision != chain.DecisionLost {
			t.Fatalf("%s", lines(res))
		}
		if won := res.Attempts[len(res.Attempts)-1]; won.Target != "eu-2" || !won.Hedge || won.Decision != chain.DecisionServed {
			t.Fatalf("%s", lines(res))
		}
	})
}

// TestStreamHedgeLoserKeepsItsRequestID: a streamed attempt that loses
// its race after its response headers arrived (its stream open, its first
// chunk not yet) is recorded, and its end observed, with the request-id
// those headers carried: the id to quote to the provider about it. So is
// a stream that fails before its first chunk for a reason of the chain's
// own (its FirstChunkTimeout), whose error carries no id.
func TestStreamHedgeLoserKeepsItsRequestID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &rprov{name: "eu-1", steps: chunks("slow ", "answer"), every: 5 * time.Second}
		fast := &rprov{name: "eu-2", steps: chunks("fast ", "answer"), every: 100 * time.Millisecond}
		var lost []string
		obs := &observe.Funcs{OnAttemptEnd: func(e observe.AttemptEnd) {
			if e.Lost {
				lost = append(lost, e.Target.Name+" "+e.RequestID)
			}
		}}
		c := deployments(t, func(b *chain.Builder) { b.Hedge(hedge.Config{Delay: time.Second}).Observe(obs) },
			func(t *chain.Target) { t.Retry = retry.Policy{} }, slow, fast)
		s := c.Stream(t.Context(), question)
		if _, err := collect(t, s); err != nil {
			t.Fatal(err)
		}
		res, _ := s.Result()
		loser := res.Attempts[0]
		if loser.Target != "eu-1" || loser.Decision != chain.DecisionLost || loser.RequestID != "req_eu-1" {
			t.Fatalf("the loser's record has request-id %q, want req_eu-1:\n%s", loser.RequestID, lines(res))
		}
		if len(lost) != 1 || lost[0] != "eu-1 req_eu-1" {
			t.Fatalf("lost attempts observed: %q; want eu-1 with req_eu-1", lost)
		}

		silent := &rprov{name: "eu-3", steps: chunks("late"), every: 10 * time.Second}
		c2, err := chain.New("c").Primary(chain.Target{Name: "eu-3", Provider: silent, Model: "m",
			Retry: retry.Policy{MaxAttempts: 1}, FirstChunkTimeout: time.Second}).Build()
		if err != nil {
			t.Fatal(err)
		}
		s = c2.Stream(t.Context(), question)
		if _, err := collect(t, s); llm.KindOf(err) != llm.KindTimeout {
			t.Fatalf("no first chunk within a second: %v", err)
		}
		res, _ = s.Result()
		if a := res.Attempts[0]; a.Kind != llm.KindTimeout || a.RequestID != "req_eu-3" {
			t.Fatalf("the stream cut before its first chunk has request-id %q, want req_eu-3:\n%s", a.RequestID, lines(res))
		}
	})
}

// TestPanicMidRaceCancelsTheRacers: when a panic ends a race (the
// hedge's provider's, or one on the walk's own goroutine: here an
// observer's, at the hedge's start), the attempt still running is
// canceled, not left to its provider, and the panic reaches the caller.
func TestPanicMidRaceCancelsTheRacers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		panics   string
		hedge    func() llm.Provider
		observer func(observe.AttemptStart)
	}{
		{"observer", "observer", func() llm.Provider { return &timed{name: "eu-2", delay: 100 * time.Millisecond} },
			func(e observe.AttemptStart) {
				if e.Hedge {
					panic("observer")
				}
			}},
		{"hedge's provider", "provider bug", func() llm.Provider { return &panicsOnce{timed: timed{name: "eu-2"}} }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				slow := &timed{name: "eu-1", release: make(chan struct{})} // answers only when canceled
				b := chain.New("hedged").Hedge(hedge.Config{Delay: time.Second}).Observe(&observe.Funcs{OnAttemptStart: tc.observer})
				b.Primary(chain.Target{Name: "eu-1", Provider: slow, Model: "m"})
				b.OrDeployment(chain.Target{Name: "eu-2", Provider: tc.hedge(), Model: "m"})
				c, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				mustPanic(t, c, tc.panics)
				synctest.Wait()
				if slow.count() != 1 || slow.cancels() != 1 {
					t.Fatalf("the raced attempt: %d sent, %d canceled; want it canceled", slow.count(), slow.cancels())
				}
			})
		})
	}
}

// panicHedgeStart is an observer that panics at the start of a hedge
// while armed.
func panicHedgeStart(armed *atomic.Bool) *observe.Funcs {
	return &observe.Funcs{OnAttemptStart: func(e observe.AttemptStart) {
		if e.Hedge && armed.Load() {
			panic("observer")
		}
	}}
}

// TestPanicAtHedgeStartGivesBackItsTicket: the hedge's breaker ticket,
// taken before its observers are told of it, is given back when one of
// them panics, so a half-open breaker is not held half-open for good.
func TestPanicAtHedgeStartGivesBackItsTicket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		eu1 := &scripted{name: "eu-1", script: []func(context.Context) (*llm.Response, error){fails, hangs, fails}}
		eu2 := &scripted{name: "eu-2", script: []func(context.Context) (*llm.Response, error){fails, answers}}
		b := chain.New("hedged").Hedge(hedge.Config{Delay: time.Second}).Observe(panicHedgeStart(&armed))
		b.Primary(chain.Target{Name: "eu-1", Provider: eu1, Model: "m", Retry: retry.Policy{MaxAttempts: 1}})
		b.OrDeployment(chain.Target{Name: "eu-2", Provider: eu2, Model: "m", Retry: retry.Policy{MaxAttempts: 1},
			Breaker: breaker.Config{ConsecutiveFailures: 1, FirstOpenFor: time.Second}})
		c, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(t.Context(), question); err == nil { // both fail: eu-2's breaker opens
			t.Fatal("the first call was answered")
		}
		time.Sleep(2 * time.Second) // eu-2's breaker is due to probe
		armed.Store(true)
		mustPanic(t, c, "observer") // eu-1 hangs; the hedge to eu-2 takes the probe slot
		armed.Store(false)
		synctest.Wait()
		res, err := c.Call(t.Context(), question) // eu-1 fails: eu-2 is probed and answers
		if err != nil || res.Served.Target != "eu-2" {
			t.Fatalf("eu-2 was not probed after the panic: %v %v", err, res.Attempts)
		}
	})
}

// TestRacerPanickingOnCancelIsReleasedOnce: a racer whose provider panics
// when the race is abandoned gave back its count in flight itself; the
// race does not give it back a second time (its target would read -1 in
// flight for good, and least-loaded spreading would favour it).
func TestRacerPanickingOnCancelIsReleasedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var armed atomic.Bool
		panicsOnCancel := func(ctx context.Context) (*llm.Response, error) {
			<-ctx.Done()
			panic("provider bug")
		}
		eu1 := &scripted{name: "eu-1", script: []func(context.Context) (*llm.Response, error){panicsOnCancel, answers}}
		eu2 := &scripted{name: "eu-2", script: []func(context.Context) (*llm.Response, error){panicsOnCancel, answers}}
		b := chain.New("hedged").Spread(spread.LeastLoaded).Hedge(hedge.Config{Delay: time.Second}).Observe(panicHedgeStart(&armed))
		b.Primary(chain.Target{Name: "eu-1", Provider: eu1, Model: "m"})
		b.OrDeployment(chain.Target{Name: "eu-2", Provider: eu2, Model: "m"})
		c, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		armed.Store(true)
		mustPanic(t, c, "observer")
		armed.Store(false)
		synctest.Wait()
		res, err := c.Call(t.Context(), question)
		if err != nil {
			t.Fatal(err)
		}
		if ch := res.Attempts[0].Choice; ch == nil || ch.Figure != 0 || ch.AgainstFigure != 0 {
			t.Fatalf("in flight after the call ended: %v; want both targets at 0", res.Attempts[0])
		}
	})
}

// TestHedgeIsPacedByItsOwnRequest: a throttled hedge target is asked for
// a slot for the request it would send (its own MaxTokens), not for the
// request of the attempt it hedges.
func TestHedgeIsPacedByItsOwnRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := chain.New("hedged").Hedge(hedge.Config{Delay: time.Second})
		b.Primary(chain.Target{Name: "eu-1", Provider: &timed{name: "eu-1", delay: 8 * time.Second}, Model: "m",
			Params: llm.Params{MaxTokens: 8000}})
		b.OrDeployment(chain.Target{Name: "eu-2", Provider: &timed{name: "eu-2", delay: 100 * time.Millisecond}, Model: "m",
			Params: llm.Params{MaxTokens: 50}, Throttle: throttle.Config{TokensPerMinute: 6000}}) // 100 tokens now
		c, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), question)
		if err != nil || res.Served.Target != "eu-2" {
			t.Fatalf("the hedge was not sent to eu-2, which had room for its own request: %v %v", err, res.Attempts)
		}
	})
}

// TestHedgeBeyondTheSixtyFourthTarget: a target at index 64 or beyond is
// hedged, and hedged to, like any other. The walk marked the targets it
// had raced in one 64-bit word, and silently never hedged past it.
func TestHedgeBeyondTheSixtyFourthTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ps []llm.Provider
		for i := range 64 { // each fails at once: the walk comes to index 64
			ps = append(ps, &timed{name: fmt.Sprintf("down-%d", i), err: &llm.Error{Provider: "stub", Status: 500, Kind: llm.KindServer}})
		}
		slow := &timed{name: "slow", delay: 10 * time.Second}
		fast := &timed{name: "fast"}
		ps = append(ps, slow, fast)
		c := deployments(t, func(b *chain.Builder) { b.Hedge(hedge.Config{Delay: time.Second}) },
			func(t *chain.Target) {
				t.Retry = retry.Policy{MaxAttempts: 1}
				t.Breaker = breaker.Config{Disabled: true}
			}, ps...)
		start := time.Now()
		res, err := c.Call(t.Context(), question)
		if err != nil {
			t.Fatalf("%v\n%s", err, lines(res))
		}
		if res.Served.Target != "fast" || time.Since(start) != time.Second {
			t.Fatalf("served by %s after %v; want the hedge to index 65 after the 1s delay\n%s", res.Served.Target, time.Since(start), lines(res))
		}
	})
}

package backstop_test

// End-to-end tests of the state a chain keeps between calls: circuit
// breakers, retry budgets and the Retry-After gate, in virtual time on the
// fake provider.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/retry"
)

// breakerOpenFor is the breaker's default OpenFor.
const breakerOpenFor = 5 * time.Second

// pair is a primary and a sibling on one fake deployment.
func pair(t *testing.T, primary chain.Target) (*fake.Server, *chain.Chain) {
	t.Helper()
	f := fake.New()
	p := claude(t, f)
	primary.Name, primary.Provider, primary.Model = "sonnet", p, sonnet
	c, err := chain.New("support").
		Primary(primary).
		OrSibling(chain.Target{Name: "haiku", Provider: p, Model: haiku}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return f, c
}

func mustCall(t *testing.T, c *chain.Chain) *chain.Result {
	t.Helper()
	res, err := c.Call(t.Context(), ask)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestBreakerOpensSkipsProbesOnceAndCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, c := pair(t, chain.Target{Retry: retry.Policy{MaxAttempts: 1}})
		f.Script(sonnet, fake.Status(503))
		for range 5 {
			if res := mustCall(t, c); res.Served.Target != "haiku" {
				t.Fatalf("served by %q", res.Served.Target)
			}
		}
		// Open: later calls skip the primary without a request.
		for range 10 {
			res := mustCall(t, c)
			if a := res.Attempts[0]; a.Decision != chain.DecisionSkip || !errors.Is(a.Err, breaker.ErrOpen) {
				t.Fatalf("first attempt %v, want a breaker skip", a)
			}
		}
		if n := f.Requests(sonnet); n != 5 {
			t.Fatalf("the primary received %d requests, want 5", n)
		}

		// After the open period, concurrent calls send exactly one probe;
		// it fails and the breaker opens again.
		time.Sleep(breakerOpenFor + time.Millisecond)
		f.Script(sonnet, fake.Status(503).After(time.Second))
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() { mustCall(t, c) })
		}
		wg.Wait()
		if n := f.Requests(sonnet); n != 6 {
			t.Fatalf("the primary received %d requests after the open period, want exactly one probe (6 in all)", n)
		}
		mustCall(t, c)
		if n := f.Requests(sonnet); n != 6 {
			t.Fatal("a failed probe did not reopen the breaker")
		}

		// The next probe succeeds and closes it.
		time.Sleep(breakerOpenFor + time.Millisecond)
		f.Script(sonnet, fake.Answer("back"))
		for range 3 {
			if res := mustCall(t, c); res.Served.Target != "sonnet" {
				t.Fatalf("served by %q after a successful probe", res.Served.Target)
			}
		}
	})
}

func TestSpendCapOpensTheBreakerAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, c := pair(t, chain.Target{})
		f.Script(sonnet, fake.SpendCap())
		mustCall(t, c)
		res := mustCall(t, c)
		if f.Requests(sonnet) != 1 || !errors.Is(res.Attempts[0].Err, breaker.ErrOpen) {
			t.Fatalf("%d requests; second call's first attempt %v", f.Requests(sonnet), res.Attempts[0])
		}
	})
}

// storm runs 200 concurrent calls against a primary answering 503 to
// everything and returns the requests the primary received.
func storm(t *testing.T, b budget.Budget) int {
	var n int
	synctest.Test(t, func(t *testing.T) {
		f, c := pair(t, chain.Target{Budget: b, Breaker: breaker.Config{Disabled: true}})
		f.Script(sonnet, fake.Status(503))
		var wg sync.WaitGroup
		for range 200 {
			wg.Go(func() {
				if res := mustCall(t, c); res.Served.Target != "haiku" {
					t.Errorf("served by %q", res.Served.Target)
				}
			})
		}
		wg.Wait()
		n = f.Requests(sonnet)
	})
	return n
}

func TestRetryBudgetKeepsAFailingPrimaryNear1Point1RequestsPerCall(t *testing.T) {
	ratio := storm(t, nil) // nil: the default ratio budget
	tokens, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 100, Cost: 5, Refund: 1})
	if err != nil {
		t.Fatal(err)
	}
	bucket := storm(t, tokens)
	unlimited := storm(t, budget.Unlimited())
	t.Logf("requests to the failing primary for 200 calls: ratio budget %d, token bucket %d, unlimited %d", ratio, bucket, unlimited)
	if limit := 200*11/10 + 10; ratio > limit { // 10: the budget's default floor
		t.Errorf("ratio budget: %d requests, want at most %d (1.1 per call plus the floor)", ratio, limit)
	}
	if bucket != 200+100/5 {
		t.Errorf("token bucket: %d requests, want 220 (200 first attempts, 20 retries of cost 5 from 100 tokens)", bucket)
	}
	if unlimited != 600 {
		t.Errorf("unlimited: %d requests, want 3 per call", unlimited)
	}
}

// refusedRetry is a call whose primary answers 503 with an empty retry
// budget: the retry is refused and the sibling serves.
func refusedRetry(t *testing.T) (*fake.Server, *chain.Result) {
	t.Helper()
	empty, _ := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 1, Cost: 1, Refund: 1})
	_ = empty.Withdraw(t.Context())
	f, c := pair(t, chain.Target{Budget: empty})
	f.Script(sonnet, fake.Status(503))
	return f, mustCall(t, c)
}

func TestBudgetRefusalIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, res := refusedRetry(t)
		if len(res.Attempts) != 3 {
			t.Fatalf("attempts %v", res.Attempts)
		}
		if a := res.Attempts[1]; a.Decision != chain.DecisionSkip || a.N != 2 || !errors.Is(a.Err, budget.ErrExhausted) {
			t.Fatalf("refused retry recorded as %+v", a)
		}
		if f.Requests(sonnet) != 1 {
			t.Fatalf("%d requests to the primary", f.Requests(sonnet))
		}
	})
}

func TestLongRetryAfterClosesTheGateForConcurrentCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, c := pair(t, chain.Target{})
		f.Script(sonnet, fake.RateLimited("60"), fake.Answer("back"))
		start := time.Now()
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * 10 * time.Millisecond) // 200 callers over 2s
				res := mustCall(t, c)
				if res.Served.Target != "haiku" {
					t.Errorf("caller %d served by %q", i, res.Served.Target)
				}
				if i > 0 && !errors.Is(res.Attempts[0].Err, breaker.ErrGateClosed) {
					t.Errorf("caller %d: first attempt %v, want a gate skip", i, res.Attempts[0])
				}
			})
		}
		wg.Wait()
		if n := f.Requests(sonnet); n != 1 {
			t.Fatalf("the primary received %d requests, want 1", n)
		}
		time.Sleep(time.Until(start.Add(60*time.Second)) - time.Nanosecond)
		if res := mustCall(t, c); res.Served.Target != "haiku" {
			t.Fatalf("the gate opened before 60s")
		}
		time.Sleep(time.Nanosecond)
		if res := mustCall(t, c); res.Served.Target != "sonnet" || f.Requests(sonnet) != 2 {
			t.Fatalf("after 60s: served by %q, %d requests", res.Served.Target, f.Requests(sonnet))
		}
	})
}

func TestRulesOverrideTheDecisionTablePerTarget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		timeouts := retry.DefaultTable().Rule(llm.KindServer)
		timeouts.Attempts = 5
		passOn := retry.DefaultTable().Rule(llm.KindBadRequest)
		passOn.Fallback = retry.Next
		f, c := pair(t, chain.Target{Retry: retry.Policy{MaxAttempts: 5, Rules: map[llm.Kind]retry.Rule{
			llm.KindServer:      timeouts,
			llm.KindRateLimited: {Retry: false},
			llm.KindBadRequest:  passOn,
		}}, Breaker: breaker.Config{Disabled: true}})
		f.Script(sonnet, fake.ServerError())
		mustCall(t, c)
		if n := f.Requests(sonnet); n != 5 {
			t.Fatalf("server errors: %d attempts, want 5", n)
		}
		f.Script(sonnet, fake.RateLimited("1"))
		mustCall(t, c)
		if n := f.Requests(sonnet); n != 6 {
			t.Fatalf("rate limit: %d attempts in all, want 1 more", n)
		}
		f.Script(sonnet, fake.BadRequest("this target's schema differs"))
		if res := mustCall(t, c); res.Served.Target != "haiku" {
			t.Fatalf("bad request not passed on: %q", res.Served.Target)
		}
	})
}

// A Retry-After beyond MaxRetryAfter closes the gate even when the target
// had no attempt left (MaxAttempts 1, the last attempt, x-should-retry:
// false): concurrent calls must not rediscover the 429.
func TestLongRetryAfterOnTheLastAttemptClosesTheGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, c := pair(t, chain.Target{Retry: retry.Policy{MaxAttempts: 1}})
		f.Script(sonnet, fake.RateLimited("600"))
		mustCall(t, c)
		res := mustCall(t, c)
		if n := f.Requests(sonnet); n != 1 || !errors.Is(res.Attempts[0].Err, breaker.ErrGateClosed) {
			t.Fatalf("the primary received %d requests; second call's first attempt %v, want a gate skip", n, res.Attempts[0])
		}
	})
}

// A refused retry is in the call's error: errors.Is(err, budget.ErrExhausted).
func TestBudgetExhaustedIsReachableFromTheError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		empty, _ := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 1, Cost: 1, Refund: 1})
		_ = empty.Withdraw(t.Context())
		f := fake.New()
		c, err := chain.New("support").Primary(chain.Target{Name: "p", Provider: claude(t, f), Model: sonnet, Budget: empty}).Build()
		if err != nil {
			t.Fatal(err)
		}
		f.Script(sonnet, fake.Status(503))
		res, err := c.Call(t.Context(), ask)
		if !errors.Is(err, budget.ErrExhausted) {
			t.Fatalf("errors.Is(err, budget.ErrExhausted) = false for %v (attempts %v)", err, res.Attempts)
		}
	})
}

// The attempt after which a retry was refused is decided "next": the chain
// did not retry, it moved on.
func TestRefusedRetryIsDecidedNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, res := refusedRetry(t)
		if d := res.Attempts[0].Decision; d != chain.DecisionNext {
			t.Fatalf("attempt %v: decision %v, want next (no retry was sent)", res.Attempts[0], d)
		}
	})
}

// A retry granted by the budget but never sent (the caller canceled during
// the wait) is refunded.
func TestRetryGrantedButNotSentIsRefunded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 5, Cost: 5, Refund: 1})
		f, c := pair(t, chain.Target{Budget: tb})
		f.Script(sonnet, fake.RateLimited("10"))
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		if _, err := c.Call(ctx, ask); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if f.Requests(sonnet) != 1 {
			t.Fatalf("%d requests sent; want 1", f.Requests(sonnet))
		}
		if err := tb.Withdraw(t.Context()); err != nil { // a retry costs the whole bucket
			t.Fatalf("a retry never sent was not given back: the bucket refuses the next (%v)", err)
		}
	})
}

// panicky panics in Complete while boom is set.
type panicky struct {
	llm.Provider
	boom atomic.Bool
}

func (p *panicky) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if p.boom.Load() {
		panic("provider bug")
	}
	return p.Provider.Complete(ctx, req)
}

// A provider that panics during the half-open probe releases the probe
// slot: the breaker does not skip the target as "probe in flight" forever
// (HTTP servers recover handler panics, so the process lives on).
func TestPanicDuringTheProbeReleasesTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		p := &panicky{Provider: claude(t, f)}
		c, err := chain.New("support").
			Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet, Retry: retry.Policy{MaxAttempts: 1}}).
			OrSibling(chain.Target{Name: "haiku", Provider: claude(t, f), Model: haiku}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		f.Script(sonnet, fake.Status(503))
		for range 5 {
			mustCall(t, c)
		}
		time.Sleep(breakerOpenFor + time.Millisecond)
		p.boom.Store(true)
		func() {
			defer func() { _ = recover() }()
			c.Call(t.Context(), ask)
		}()
		p.boom.Store(false)
		f.Script(sonnet, fake.Answer("back"))
		time.Sleep(24 * time.Hour)
		res := mustCall(t, c)
		if res.Served.Target != "sonnet" {
			t.Fatalf("a day after a panicking probe the primary is still skipped: %v", res.Attempts[0])
		}
	})
}

// An attempt cut short by the deadline after it had a fair share of it
// counts against the target: a primary that hangs until every call's
// deadline (no per-attempt Timeout) opens its breaker, and later calls reach
// the fallback.
func TestHangingPrimaryOpensTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		p := claude(t, f)
		c, err := chain.New("support").Deadline(10 * time.Second).
			Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet}).
			OrSibling(chain.Target{Name: "haiku", Provider: p, Model: haiku}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		f.Script(sonnet, fake.Hang())
		served := 0
		for range 20 {
			if res, err := c.Call(t.Context(), ask); err == nil && res.Served.Target == "haiku" {
				served++
			}
		}
		if n := f.Requests(sonnet); n >= 20 {
			t.Fatalf("20 calls sent %d requests to a hanging primary, each using the whole 10s deadline; %d of 20 served (by the sibling): the breaker never opened", n, served)
		}
	})
}

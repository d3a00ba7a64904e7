package backstop_test

// Regression tests for what a review of the chain found: gate, budget and
// breaker edge cases, end to end on the fake provider.

import (
	"context"
	"errors"
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
		empty, _ := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 1, Cost: 1, Refund: 1})
		_ = empty.Withdraw(t.Context())
		f, c := pair(t, chain.Target{Budget: empty})
		f.Script(sonnet, fake.Status(503))
		res := mustCall(t, c)
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
		if f.Requests(sonnet) != 1 || tb.Tokens() != 5 {
			t.Fatalf("%d requests sent, %v tokens left: a retry never sent cost %v tokens", f.Requests(sonnet), tb.Tokens(), 5-tb.Tokens())
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
		time.Sleep(breaker.DefaultOpenFor + time.Millisecond)
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

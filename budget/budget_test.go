package budget

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/backstop-llm/backstop/llm"
	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them. (The
// tests of Shared on Redis, whose clients may leave go-redis's re-dial loop
// running for a second, are redisstore's.)
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestUnlimited(t *testing.T) {
	ctx := context.Background()
	u := Unlimited()
	for range 1000 {
		u.Record(ctx, Outcome{})
		if err := u.Withdraw(ctx); err != nil {
			t.Fatalf("Unlimited refused a retry: %v", err)
		}
	}
	if u != Unlimited() {
		t.Fatal("Unlimited() must be comparable to itself so callers can tell budgeting is off")
	}
	var b Budget = newDefaultRatio()
	if b == Unlimited() {
		t.Fatal("a Ratio compares equal to Unlimited()")
	}
}

func TestErrExhaustedMatches(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, NewRatio, RatioConfig{MinRetries: 1})
	tb := mustNew(t, NewTokenBucket, TokenBucketConfig{Capacity: 1, Cost: 1})
	for name, b := range map[string]Budget{"ratio": r, "token bucket": tb} {
		if err := b.Withdraw(ctx); err != nil {
			t.Fatalf("%s: first retry refused: %v", name, err)
		}
		err := b.Withdraw(ctx)
		if !errors.Is(err, ErrExhausted) {
			t.Fatalf("%s: want ErrExhausted, got %v", name, err)
		}
		if wrapped := fmt.Errorf("target %q: %w", "sonnet", err); !errors.Is(wrapped, ErrExhausted) {
			t.Fatalf("%s: wrapped error does not match ErrExhausted", name)
		}
	}
	if !strings.Contains(ErrExhausted.Error(), "retry budget exhausted") {
		t.Fatalf("ErrExhausted message: %q", ErrExhausted)
	}
}

// storm runs n clients against a target that always fails: each records
// its first attempt, then asks for up to two retries, recording each
// granted one. It returns how many retries were granted.
func storm(b Budget, n int) int64 {
	ctx := context.Background()
	var granted atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			b.Record(ctx, Outcome{})
			for range 2 {
				if b.Withdraw(ctx) != nil {
					return
				}
				granted.Add(1)
				b.Record(ctx, Outcome{Retry: true})
			}
		})
	}
	wg.Wait()
	return granted.Load()
}

// The headline property: against a failing target, 200 concurrent clients
// with 3 attempts each send 400 retries without a budget, and with the
// default budget at most max(MinRetries, 10% of 200) = 20, within the
// brief's looser bound of 10% of 200 + MinRetries = 30.
func TestStormRatioBudget(t *testing.T) {
	const clients = 200
	if got := storm(Unlimited(), clients); got != 2*clients {
		t.Fatalf("Unlimited: %d retries, want %d", got, 2*clients)
	}
	limit := int64(max(defaultMinRetries, clients*defaultRatio))
	seen := map[int64]int{}
	for range 50 {
		synctest.Test(t, func(t *testing.T) { // virtual time: the window cannot roll
			r := newDefaultRatio()
			got := storm(r, clients)
			seen[got]++
			if got > limit {
				t.Fatalf("%d clients: %d retries granted, want at most %d", clients, got, limit)
			}
			if got > defaultMinRetries+clients*defaultRatio {
				t.Fatalf("%d retries exceed even the loose bound", got)
			}
			// Every refused reservation was undone: the counts are exact and
			// what the storm left of the allowance is still there to take.
			if f, rt := r.counts(); f != clients || rt != got {
				t.Fatalf("Counts = (%d, %d), want (%d, %d)", f, rt, clients, got)
			}
			topUp := drain(r)
			if got+topUp != limit {
				t.Fatalf("storm %d + top-up %d != allowance %d", got, topUp, limit)
			}
		})
	}
	t.Logf("retries granted to %d clients (count: rounds): %v; unlimited: %d", clients, seen, 2*clients)
}

func TestStormRatioBudget10000(t *testing.T) {
	const clients = 10_000
	synctest.Test(t, func(t *testing.T) {
		r := newDefaultRatio()
		got := storm(r, clients)
		limit := int64(clients * defaultRatio)
		if got > limit {
			t.Fatalf("%d retries granted, want at most %d", got, limit)
		}
		if f, rt := r.counts(); f != clients || rt != got {
			t.Fatalf("Counts = (%d, %d), want (%d, %d)", f, rt, clients, got)
		}
		t.Logf("%d clients: %d retries granted (limit %d; unlimited %d)", clients, got, limit, 2*clients)
	})
}

func TestStormTokenBucket(t *testing.T) {
	const clients = 10_000
	tb := mustNew(t, NewTokenBucket, TokenBucketConfig{})
	got := storm(tb, clients)
	if want := int64(defaultCapacity / defaultCost); got != want {
		t.Fatalf("%d retries granted from a full bucket of %v at %v each, want exactly %d", got, defaultCapacity, defaultCost, want)
	}
	if tb.tokensNow() != 0 {
		t.Fatalf("tokens = %v after the storm, want 0", tb.tokensNow())
	}
}

// mustNew returns newBudget(c), failing the test on an error.
func mustNew[C, B any](t testing.TB, newBudget func(C) (B, error), c C) B {
	t.Helper()
	b, err := newBudget(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// refused fails the test unless newBudget refuses c with an error that
// matches llm.ErrInvalidConfig and says each of says.
func refused[C any, B comparable](t *testing.T, newBudget func(C) (B, error), c C, says ...string) {
	t.Helper()
	b, err := newBudget(c)
	var none B
	if b != none || !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("%+v: got (%v, %v), want llm.ErrInvalidConfig", c, b, err)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%+v: error %q should say %q", c, err, s)
		}
	}
}

// drain withdraws until refused and returns how many retries it got.
func drain(b Budget) int64 {
	var n int64
	for b.Withdraw(context.Background()) == nil {
		n++
	}
	return n
}

func TestZeroAllocs(t *testing.T) {
	ctx := context.Background()
	r := newDefaultRatio()
	tb := mustNew(t, NewTokenBucket, TokenBucketConfig{})
	for name, f := range map[string]func(){
		"Ratio.Record first":       func() { r.Record(ctx, Outcome{Success: true}) },
		"Ratio.Record retry":       func() { r.Record(ctx, Outcome{Retry: true}) },
		"Ratio.Withdraw":           func() { _ = r.Withdraw(ctx) }, // grants, then refuses
		"TokenBucket.Record":       func() { tb.Record(ctx, Outcome{Success: true}) },
		"TokenBucket.Record fail":  func() { tb.Record(ctx, Outcome{}) },
		"TokenBucket.Withdraw":     func() { _ = tb.Withdraw(ctx) }, // grants, then refuses
		"TokenBucket.Withdraw+Rec": func() { _ = tb.Withdraw(ctx); tb.Record(ctx, Outcome{Retry: true, Success: true}) },
		"Unlimited":                func() { Unlimited().Record(ctx, Outcome{}); _ = Unlimited().Withdraw(ctx) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}

var (
	_ refunder = (*Ratio)(nil)
	_ refunder = (*TokenBucket)(nil)
)

func TestRefundGivesBackAGrantedRetry(t *testing.T) {
	ctx := context.Background()
	tb, _ := NewTokenBucket(TokenBucketConfig{Capacity: 10, Cost: 5, Refund: 1})
	if tb.Withdraw(ctx) != nil || tb.tokensNow() != 5 {
		t.Fatalf("withdraw: %v tokens", tb.tokensNow())
	}
	tb.Refund(ctx)
	tb.Refund(ctx) // never above capacity
	if tb.tokensNow() != 10 {
		t.Fatalf("after refunds: %v tokens, want 10", tb.tokensNow())
	}
	synctest.Test(t, func(t *testing.T) {
		r, _ := NewRatio(RatioConfig{MinRetries: 1})
		if r.Withdraw(ctx) != nil || r.Withdraw(ctx) == nil {
			t.Fatal("the floor of 1 should grant exactly one retry")
		}
		r.Refund(ctx)
		if err := r.Withdraw(ctx); err != nil {
			t.Fatalf("a refunded retry should be grantable again: %v", err)
		}
	})
}

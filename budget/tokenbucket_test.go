package budget

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

func TestTokenBucketDefaults(t *testing.T) {
	want := TokenBucketConfig{Capacity: 500, Cost: 5, Refund: 1}
	if got := (TokenBucketConfig{}).withDefaults(); got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
	tb := mustNew(t, NewTokenBucket, TokenBucketConfig{})
	if tb.settings() != want || tb.tokensNow() != 500 {
		t.Fatalf("Config = %+v, Tokens = %v; want %+v and a full bucket", tb.settings(), tb.tokensNow(), want)
	}
	if got := drain(tb); got != 100 {
		t.Fatalf("a full default bucket granted %d retries, want 100", got)
	}
	// One retry earned back per five successes.
	for i := range 4 {
		tb.Record(context.Background(), Outcome{Success: true})
		if tb.Withdraw(context.Background()) == nil {
			t.Fatalf("retry granted after %d successes, want 5", i+1)
		}
	}
	tb.Record(context.Background(), Outcome{Success: true})
	if err := tb.Withdraw(context.Background()); err != nil {
		t.Fatalf("after 5 successes: %v", err)
	}
}

func TestTokenBucketValidate(t *testing.T) {
	for _, c := range []TokenBucketConfig{{}, {Capacity: 5}, {Cost: 500}, {Capacity: 0.3, Cost: 0.1, Refund: 0.001}, {Capacity: maxCapacity}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	cases := []struct {
		c     TokenBucketConfig
		field string
		hint  string
	}{
		{TokenBucketConfig{Capacity: -1}, "Capacity", "0 for the default"},
		{TokenBucketConfig{Capacity: math.NaN()}, "Capacity", "positive number"},
		{TokenBucketConfig{Capacity: math.Inf(1)}, "Capacity", "positive number"},
		{TokenBucketConfig{Capacity: 2 * maxCapacity}, "Capacity", "at most"},
		{TokenBucketConfig{Cost: -5}, "Cost", "positive number"},
		{TokenBucketConfig{Cost: math.NaN()}, "Cost", "positive number"},
		{TokenBucketConfig{Cost: 1e-6}, "Cost", "at least 0.001"},
		{TokenBucketConfig{Refund: -1}, "Refund", "positive number"},
		{TokenBucketConfig{Refund: math.Inf(-1)}, "Refund", "positive number"},
		{TokenBucketConfig{Refund: 1e-4}, "Refund", "at least 0.001"},
		{TokenBucketConfig{Capacity: 4}, "Cost (5) is above Capacity (4)", "raise Capacity"},
		{TokenBucketConfig{Cost: 501}, "Cost (501) is above Capacity (500)", "lower Cost"},
	}
	for _, tc := range cases {
		refused(t, NewTokenBucket, tc.c, tc.field, tc.hint)
	}
	err := TokenBucketConfig{Capacity: -1, Cost: math.NaN(), Refund: -1}.Validate()
	for _, field := range []string{"Capacity", "Cost", "Refund"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("every problem must be reported at once; %s missing: %v", field, err)
		}
	}
}

func TestTokenBucketArithmetic(t *testing.T) {
	ctx := context.Background()
	tb := mustNew(t, NewTokenBucket, TokenBucketConfig{Capacity: 10, Cost: 3, Refund: 0.5})
	step := func(what string, want float64) {
		t.Helper()
		if got := tb.tokensNow(); got != want {
			t.Fatalf("after %s: %v tokens, want %v", what, got, want)
		}
	}
	step("start", 10)
	for range 3 {
		if err := tb.Withdraw(ctx); err != nil {
			t.Fatal(err)
		}
	}
	step("3 retries at 3", 1)
	if err := tb.Withdraw(ctx); !errors.Is(err, ErrExhausted) {
		t.Fatalf("1 token left, cost 3: want ErrExhausted, got %v", err)
	}
	step("a refused retry", 1)
	tb.Record(ctx, Outcome{})
	tb.Record(ctx, Outcome{Retry: true})
	step("failures", 1)
	tb.Record(ctx, Outcome{Success: true})
	step("a success", 1.5)
	tb.Record(ctx, Outcome{Retry: true, Success: true})
	step("a successful retry", 2)
	if tb.Withdraw(ctx) == nil {
		t.Fatal("2 tokens, cost 3: granted")
	}
	tb.Record(ctx, Outcome{Success: true}) // exactly 3 left: enough
	step("three successes", 2.5)
	tb.Record(ctx, Outcome{Success: true})
	if err := tb.Withdraw(ctx); err != nil {
		t.Fatalf("3 tokens, cost 3: %v", err)
	}
	step("a retry taking the last tokens", 0)
	for range 100 {
		tb.Record(ctx, Outcome{Success: true})
	}
	step("100 successes (capped)", 10)
}

func TestTokenBucketFractions(t *testing.T) {
	// 0.1 + 0.1 + 0.1 != 0.3 in float64; the bucket counts thousandths.
	tb := mustNew(t, NewTokenBucket, TokenBucketConfig{Capacity: 0.3, Cost: 0.1, Refund: 0.05})
	if got := drain(tb); got != 3 {
		t.Fatalf("granted %d, want 3", got)
	}
	tb.Record(context.Background(), Outcome{Success: true})
	tb.Record(context.Background(), Outcome{Success: true})
	if got := drain(tb); got != 1 {
		t.Fatalf("after two refunds of 0.05: granted %d, want 1", got)
	}
}

// 10,000 goroutines withdrawing and refunding at once never drive the
// bucket below zero or above its capacity, and leave it a whole number of
// refunds and costs.
func TestTokenBucketConcurrent(t *testing.T) {
	ctx := context.Background()
	const n = 10_000
	tb := mustNew(t, NewTokenBucket, TokenBucketConfig{Capacity: 50, Cost: 5, Refund: 1})
	var lo, hi atomic.Int64
	lo.Store(math.MaxInt64)
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() { // samples the bucket while it is hammered
		defer close(watched)
		for {
			v := tb.tokens.Load()
			if v < lo.Load() {
				lo.Store(v)
			}
			if v > hi.Load() {
				hi.Store(v)
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	var granted atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if tb.Withdraw(ctx) == nil {
				granted.Add(1)
			}
			tb.Record(ctx, Outcome{Success: i%3 == 0})
		})
	}
	wg.Wait()
	close(stop)
	<-watched
	capacity := tb.capacity
	if lo.Load() < 0 || hi.Load() > capacity {
		t.Fatalf("tokens went to [%d, %d] thousandths, outside [0, %d]", lo.Load(), hi.Load(), capacity)
	}
	if v := tb.tokens.Load(); v < 0 || v > capacity || v%1000 != 0 {
		t.Fatalf("tokens left: %d thousandths", v)
	}
	if g := granted.Load(); g < 10 || g > n {
		t.Fatalf("granted %d", g)
	}
	t.Logf("%d goroutines: %d retries granted, %v tokens left, sampled range [%v, %v]",
		n, granted.Load(), tb.tokensNow(), float64(lo.Load())/milli, float64(hi.Load())/milli)
}

package budget_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/llm"
)

// send stands in for one attempt against a target that is down.
func send(context.Context) error { return errors.New("503 overloaded") }

// call is what the chain does on one target for one call: a first attempt,
// then up to two retries, each asked of the budget first. In a chain the
// budget is set per target with chain.Target{Budget: b}; a nil Budget means
// a default Ratio, and budget.Unlimited() switches budgeting off.
func call(ctx context.Context, b budget.Budget) (retries int, err error) {
	err = send(ctx)
	b.Record(ctx, budget.Outcome{Success: err == nil})
	for range 2 {
		if err == nil {
			return retries, nil
		}
		if werr := b.Withdraw(ctx); werr != nil {
			return retries, werr // the chain moves on to the next target
		}
		retries++
		err = send(ctx)
		b.Record(ctx, budget.Outcome{Retry: true, Success: err == nil})
	}
	return retries, err
}

// A target that is down gets 200 calls. Without a budget every call retries
// twice: 600 requests instead of 200. With the default ratio budget (10% of
// first attempts over 10s, at least 10) the retries stop at 20.
func Example() {
	ctx := context.Background()
	b, err := budget.NewRatio(budget.RatioConfig{}) // the defaults
	if err != nil {
		panic(err)
	}
	total, refused := 0, 0
	for range 200 {
		n, err := call(ctx, b)
		total += n
		if errors.Is(err, budget.ErrExhausted) {
			refused++
		}
	}
	fmt.Println("retries with the ratio budget:", total)
	fmt.Println("calls refused a retry:", refused)

	total = 0
	for range 200 {
		n, _ := call(ctx, budget.Unlimited())
		total += n
	}
	fmt.Println("retries without a budget:", total)
	// Output:
	// retries with the ratio budget: 20
	// calls refused a retry: 195
	// retries without a budget: 400
}

// A token bucket lends a burst of Capacity/Cost retries and earns one back
// per Cost/Refund successes.
func ExampleNewTokenBucket() {
	ctx := context.Background()
	b, err := budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: 10, Cost: 5, Refund: 1})
	if err != nil {
		panic(err)
	}
	fmt.Println(b.Withdraw(ctx), b.Withdraw(ctx)) // 10 tokens: two retries
	fmt.Println(errors.Is(b.Withdraw(ctx), budget.ErrExhausted))
	for range 5 {
		b.Record(ctx, budget.Outcome{Success: true}) // a token back for each
	}
	fmt.Println(b.Withdraw(ctx), errors.Is(b.Withdraw(ctx), budget.ErrExhausted))
	// Output:
	// <nil> <nil>
	// true
	// <nil> true
}

func ExampleNewRatio_invalid() {
	_, err := budget.NewRatio(budget.RatioConfig{Ratio: 1.5})
	fmt.Println(errors.Is(err, llm.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// budget: invalid configuration: ratio budget: Ratio is 1.5; it must be at most 1 (no more retries than first attempts); use Unlimited() to switch budgeting off
}

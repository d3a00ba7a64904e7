package breaker_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/retry"
)

// Fifty concurrent attempts to a target that fails 30% of requests fast
// and answers the rest slowly: the fifteen failures finish first, in a
// row, and the breaker stays closed; the ratio counts them against the
// fifty sent, not against the fifteen finished. This goes on for a minute
// of traffic, every attempt's failures ahead of its successes.
func TestFastFailuresUnderConcurrencyDoNotTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		for round := range 60 {
			var tickets []breaker.Ticket
			for i := range 50 {
				tk, err := b.Allow()
				if err != nil {
					t.Fatalf("round %d, attempt %d: %v; want closed (30%% of attempts fail)", round, i, err)
				}
				tickets = append(tickets, tk)
			}
			time.Sleep(10 * time.Millisecond)
			for _, tk := range tickets[:15] {
				tk.Report(retry.Failure)
			}
			time.Sleep(490 * time.Millisecond)
			for _, tk := range tickets[15:] {
				tk.Report(retry.NotFailure)
			}
			time.Sleep(500 * time.Millisecond)
		}
		wantState(t, b, breaker.Closed, "opened by 30% failures")
	})
}

// While the window holds MinRequests attempts or more, the ratio decides
// alone: a run of failures under it does not open the breaker, one that
// takes the ratio to FailureRatio does. With fewer, five consecutive
// failures open it (TestSlowConsecutiveFailuresOpen).
func TestRatioDecidesOnceTheWindowHoldsMinRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		var held []breaker.Ticket
		for range 30 { // 30 in flight
			tk, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, tk)
		}
		for _, tk := range held[:14] { // 14 of 30 fail in a row: under half
			tk.Report(retry.Failure)
			wantState(t, b, breaker.Closed, "opened under the ratio")
		}
		held[14].Report(retry.Failure) // 15 of 30: half
		wantState(t, b, breaker.Open, "not open at half of 30")
	})
}

// A dead target at low traffic still opens after five failures: one call
// a second, each failing, opens it at the fifth.
func TestConsecutiveFailuresOpenAtLowTraffic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		for range 4 {
			report(t, b, retry.Failure)
			time.Sleep(time.Second)
		}
		wantState(t, b, breaker.Closed, "opened before the fifth failure")
		report(t, b, retry.Failure)
		wantState(t, b, breaker.Open, "not open after five failures at one a second")
	})
}

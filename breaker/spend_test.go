package breaker_test

import (
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/retry"
)

// settle sends one attempt through b as a chain does (Admit in Send, then
// Settle) that ended with verdict v and cost spent.
func settle(t *testing.T, b *breaker.Breaker, v retry.BreakerVerdict, spent cost.Money) {
	t.Helper()
	a := &policy.Attempt{Phase: policy.Send, Target: "t", N: 1}
	adm := b.Admit(t.Context(), a)
	if adm.Err != nil {
		t.Fatalf("Admit: %v", adm.Err)
	}
	b.Settle(t.Context(), a, adm.Hold, &policy.Outcome{Sent: true, Verdict: v, Success: v == retry.NotFailure,
		At: time.Now(), Cost: cost.Cost{Spent: spent}})
}

// TestMaxFailedSpendOpensOnMoneyBurned: with a failure count far out of
// reach, failures costing $0.50 each open a breaker whose MaxFailedSpend
// is $1 at the second, as a failure-count trip would (the same opening,
// probe and state changes); successes, however dear, count nothing; the
// window forgets a failure older than it; a close starts the sum again.
func TestMaxFailedSpendOpensOnMoneyBurned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes []string
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1000, MinRequests: 1000, MaxFailedSpend: cost.Dollars(1),
			OnStateChange: func(_ string, from, to breaker.State) { changes = append(changes, from.String()+">"+to.String()) }})
		half := cost.Dollars(0.5)
		want := func(s breaker.State, when string) {
			t.Helper()
			if got := b.State(); got != s {
				t.Fatalf("%s: %v, want %v", when, got, s)
			}
		}

		settle(t, b, retry.Failure, half)
		settle(t, b, retry.NotFailure, cost.Dollars(5)) // a success: not counted
		settle(t, b, retry.NotFailure, cost.Dollars(5))
		settle(t, b, retry.Excluded, half) // cut short by the caller: not counted
		want(breaker.Closed, "$0.50 of failures and $10 of successes")

		time.Sleep(11 * time.Second) // past the 10s window: the first failure is forgotten
		settle(t, b, retry.Failure, half)
		want(breaker.Closed, "$0.50 in the window, $1 since the start")

		settle(t, b, retry.Failure, half)
		want(breaker.Open, "$1 of failures in the window")
		if adm := b.Admit(t.Context(), &policy.Attempt{Phase: policy.Send}); !errors.Is(adm.Err, breaker.ErrOpen) {
			t.Fatalf("an open breaker admitted: %v", adm.Err)
		}

		time.Sleep(breaker.DefaultFirstOpenFor + time.Nanosecond) // the same opening as a count's
		settle(t, b, retry.NotFailure, 0)                         // the probe
		want(breaker.Closed, "after the probe")
		settle(t, b, retry.Failure, half)
		want(breaker.Closed, "$0.50 since the close")
		if got := strings.Join(changes, " "); got != "closed>open open>half-open half-open>closed" {
			t.Errorf("state changes %q", got)
		}
	})
}

// TestMaxFailedSpendOffCountsFailuresOnly: without MaxFailedSpend the
// same dear failures leave the breaker closed; a negative amount is a
// configuration error naming the field.
func TestMaxFailedSpendOffCountsFailuresOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1000, MinRequests: 1000})
		for range 10 {
			settle(t, b, retry.Failure, cost.Dollars(0.5))
		}
		if got := b.State(); got != breaker.Closed {
			t.Fatalf("$5 of failures without MaxFailedSpend: %v", got)
		}
	})
	_, err := breaker.New("t", breaker.Config{MaxFailedSpend: -1})
	if !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxFailedSpend is -$0") {
		t.Errorf("negative MaxFailedSpend: %v", err)
	}
}

package breaker_test

// Regression tests for what a review of the breaker found.

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/retry"
)

// Attempts that last longer than the window still count: a target whose
// attempts all fail slowly (hangs cut by a 40s Timeout, say) opens.
func TestSlowFailuresOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Settings{})
		report(t, b, retry.Failure) // one quick failure: the breaker is now "dirty"
		for round := range 5 {
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					tk, err := b.Allow()
					if err != nil {
						return // opened: what we want
					}
					time.Sleep(35 * time.Second) // attempt timeout > Window (30s)
					tk.Report(retry.Failure)
				})
			}
			wg.Wait()
			t.Logf("round %d: state %v", round, b.State())
		}
		if b.State() != breaker.Open {
			t.Fatalf("after 40 consecutive failures (100%% of attempts) the breaker is %v, want open", b.State())
		}
	})
}

// A failure of an attempt that started on the healthy path before the
// breaker opened is not reported to the half-open breaker: it would take
// the probe slot and reopen the breaker on stale evidence.
func TestStaleHealthyPathFailureDoesNotTakeTheProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Settings{})
		stale, err := b.Allow() // healthy path; a long generation starts
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			report(t, b, retry.Failure)
		}
		if b.State() != breaker.Open {
			t.Fatal("setup: not open")
		}
		time.Sleep(breaker.DefaultOpenFor + time.Millisecond) // the provider has recovered
		stale.Report(retry.Failure)                           // the old attempt finally times out
		if _, err := b.Allow(); err != nil {
			t.Fatalf("a fresh probe is refused (%v, state %v): the stale failure used the half-open probe and reopened the breaker", err, b.State())
		}
	})
}

// When a probe closes the breaker, the failure ratio starts afresh: the
// failures from before it opened do not reopen it.
func TestRatioWindowStartsAfreshOnRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Settings{ConsecutiveFailures: 1000, OpenFor: 5 * time.Second})
		for range 20 {
			if tk, err := b.Allow(); err == nil {
				tk.Report(retry.Failure)
			}
		}
		if b.State() != breaker.Open {
			t.Fatal("setup: 20 of 20 failures should open by ratio")
		}
		time.Sleep(5*time.Second + time.Millisecond)
		report(t, b, retry.NotFailure) // the probe succeeds: closed
		for range 9 {
			report(t, b, retry.NotFailure)
		}
		report(t, b, retry.Failure) // 1 failure in 10 calls since recovery
		if b.State() != breaker.Closed {
			t.Fatalf("one failure out of 10 since recovery reopened the breaker (%v)", b.State())
		}
	})
}

// A quiet target failing every call, one call every 8s, opens after 5
// consecutive failures: they do not decay with time.
func TestSlowConsecutiveFailuresOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Settings{})
		for range 20 {
			tk, err := b.Allow()
			if err != nil {
				return
			}
			tk.Report(retry.Failure)
			time.Sleep(8 * time.Second)
		}
		t.Fatalf("20 consecutive failures, 8s apart, and the breaker is still %v", b.State())
	})
}

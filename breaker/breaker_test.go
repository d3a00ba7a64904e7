package breaker_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
	"github.com/sony/gobreaker/v2"
)

func mustNew(t testing.TB, s breaker.Config) *breaker.Breaker {
	t.Helper()
	b, err := breaker.New("t", s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func report(t *testing.T, b *breaker.Breaker, v retry.BreakerVerdict) {
	t.Helper()
	tk, err := b.Allow()
	if err != nil {
		t.Fatalf("Allow: %v", err)
	}
	tk.Report(v)
}

// reportN reports v on b n times.
func reportN(t *testing.T, b *breaker.Breaker, v retry.BreakerVerdict, n int) {
	t.Helper()
	for range n {
		report(t, b, v)
	}
}

// wantState fails the test with msg unless b is in state want.
func wantState(t *testing.T, b *breaker.Breaker, want breaker.State, msg string) {
	t.Helper()
	if b.State() != want {
		t.Fatal(msg)
	}
}

func TestOpensAfterConsecutiveFailuresThenProbesOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tr transitions
		// OpenFor a minute: the default is a fixed 5s; the doubling is
		// configured.
		b := mustNew(t, breaker.Config{OpenFor: time.Minute, OnStateChange: tr.record})
		reportN(t, b, retry.Failure, 4)
		wantState(t, b, breaker.Closed, "opened before the 5th failure")
		report(t, b, retry.Failure)
		wantState(t, b, breaker.Open, "not open after 5 consecutive failures")
		if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Allow while open: %v", err)
		}
		// The first opening lasts DefaultFirstOpenFor (5s); half-open once
		// it has passed, not at it.
		time.Sleep(breaker.DefaultFirstOpenFor)
		if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) {
			t.Fatal("half-open before FirstOpenFor passed")
		}
		time.Sleep(time.Nanosecond)
		probe, err := b.Allow()
		if err != nil {
			t.Fatalf("probe refused: %v", err)
		}
		if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) || !strings.Contains(err.Error(), "probe") {
			t.Fatalf("a second probe went through: %v", err)
		}
		probe.Report(retry.Failure)
		wantState(t, b, breaker.Open, "a failed probe should reopen")
		time.Sleep(2 * breaker.DefaultFirstOpenFor) // reopened for twice as long
		wantState(t, b, breaker.Open, "half-open before twice FirstOpenFor passed")
		time.Sleep(time.Nanosecond)
		report(t, b, retry.NotFailure)
		wantState(t, b, breaker.Closed, "a successful probe should close")
		tr.want(t, "closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>closed")
	})
}

func TestOpensOnFailureRatioInTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		// 20 calls alternating success and failure: never 5 in a row, 50%.
		for i := range 19 {
			report(t, b, retry.BreakerVerdict(i%2)) // NotFailure, Failure, ...
		}
		wantState(t, b, breaker.Closed, "opened before MinRequests")
		report(t, b, retry.Failure)
		wantState(t, b, breaker.Open, "not open at 10 failures of 20")
	})
}

// Consecutive failures count however far apart they come: only a success
// resets them. Four failures, a quiet minute, and a fifth open the breaker.
func TestConsecutiveFailuresDoNotDecayWithTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		reportN(t, b, retry.Failure, 4)
		time.Sleep(time.Minute)
		report(t, b, retry.Failure)
		wantState(t, b, breaker.Open, "five consecutive failures a minute apart did not open the breaker")
	})
}

func TestTripOpensAtOnceAndOthersDoNotCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		for range 50 {
			report(t, b, retry.NotFailure)
			report(t, b, retry.Excluded)
		}
		report(t, b, retry.Trip)
		wantState(t, b, breaker.Open, "Trip did not open the breaker")
		b2 := mustNew(t, breaker.Config{})
		reportN(t, b2, retry.Excluded, 100)
		wantState(t, b2, breaker.Closed, "excluded outcomes opened the breaker")
	})
}

func TestDisabledAllowsEverything(t *testing.T) {
	b := mustNew(t, breaker.Config{Disabled: true})
	reportN(t, b, retry.Trip, 100)
	wantState(t, b, breaker.Closed, "a disabled breaker opened")
}

func TestSettingsValidate(t *testing.T) {
	_, err := breaker.New("t", breaker.Config{FailureRatio: 1.5, Window: -1, OpenFor: -time.Second, BucketPeriod: time.Minute})
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("want llm.ErrInvalidConfig, got %v", err)
	}
	for _, s := range []string{"FailureRatio", "Window is", "OpenFor"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %q: %v", s, err)
		}
	}
	if err := (breaker.Config{Window: time.Second, BucketPeriod: time.Minute}).Validate(); err == nil {
		t.Error("BucketPeriod > Window accepted")
	}
}

func TestConcurrentReports(t *testing.T) {
	b := mustNew(t, breaker.Config{ConsecutiveFailures: 1 << 30, MinRequests: 1 << 30})
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() {
			for range 100 {
				if tk, err := b.Allow(); err == nil {
					tk.Report(retry.Failure)
				}
			}
		})
	}
	wg.Wait()
	wantState(t, b, breaker.Closed, "unexpected state")
}

func TestGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g breaker.Gate
		if _, closed := g.ClosedUntil(); closed {
			t.Fatal("zero gate closed")
		}
		until := time.Now().Add(60 * time.Second)
		g.CloseUntil(until)
		g.CloseUntil(time.Now().Add(time.Second)) // never shortens
		if u, closed := g.ClosedUntil(); !closed || !u.Equal(until) {
			t.Fatalf("closed=%v until %v", closed, u)
		}
		time.Sleep(60 * time.Second)
		if _, closed := g.ClosedUntil(); closed {
			t.Fatal("gate still closed at its time")
		}
	})
}

func BenchmarkAllowReport(b *testing.B) {
	br := mustNew(b, breaker.Config{})
	b.ReportAllocs()
	for b.Loop() {
		tk, _ := br.Allow()
		tk.Report(retry.NotFailure)
	}
}

func BenchmarkGateOpen(b *testing.B) {
	var g breaker.Gate
	b.ReportAllocs()
	for b.Loop() {
		if _, closed := g.ClosedUntil(); closed {
			b.Fatal("closed")
		}
	}
}

// Successes on the healthy path never reach gobreaker, yet they must count
// for the failure ratio: a window of 1000 successes and 20 failures (2%) is
// healthy even though the failures come in a burst mixed with successes.
func TestHealthyPathSuccessesCountForTheRatio(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		reportN(t, b, retry.NotFailure, 1000)
		for range 20 {
			report(t, b, retry.Failure)
			report(t, b, retry.NotFailure)
		}
		wantState(t, b, breaker.Closed, "opened at 2% failures")
	})
}

// Attempts that started on the healthy path and then failed are reported
// late; five of them in a row still open the breaker.
func TestFailuresOfHealthyPathAttemptsAreReportedLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		var tickets []breaker.Ticket
		for range 5 {
			tk, err := b.Allow() // all five start while the breaker is clean
			if err != nil {
				t.Fatal(err)
			}
			tickets = append(tickets, tk)
		}
		for _, tk := range tickets {
			tk.Report(retry.Failure)
		}
		wantState(t, b, breaker.Open, "five late-reported failures did not open the breaker")
	})
}

// After a failure, the next success returns the breaker to the healthy
// path: a later run of four failures does not add up with an earlier one.
func TestASuccessResetsConsecutiveFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		for range 10 {
			reportN(t, b, retry.Failure, 4)
			report(t, b, retry.NotFailure)
			for range 50 {
				report(t, b, retry.NotFailure) // healthy path again
			}
		}
		wantState(t, b, breaker.Closed, "runs of four failures separated by successes opened the breaker")
	})
}

// Under concurrency, a target that fails one call in five stays closed and
// one that always fails opens.
func TestConcurrentMixedOutcomes(t *testing.T) {
	for _, tc := range []struct {
		every int // one failure every this many reports; 1: all fail
		want  breaker.State
	}{{5, breaker.Closed}, {1, breaker.Open}} {
		synctest.Test(t, func(t *testing.T) {
			b := mustNew(t, breaker.Config{ConsecutiveFailures: 1000})
			var wg sync.WaitGroup
			for g := range 50 {
				wg.Go(func() {
					for i := range 100 {
						tk, err := b.Allow()
						if err != nil {
							continue
						}
						// Staggered: with (g*100+i), every goroutine's first
						// report failed, and the first 20 in the window
						// could reach the 50% ratio.
						if (g+i)%tc.every == 0 {
							tk.Report(retry.Failure)
						} else {
							tk.Report(retry.NotFailure)
						}
					}
				})
			}
			wg.Wait()
			if got := b.State(); got != tc.want {
				t.Fatalf("one failure in %d: state %v, want %v", tc.every, got, tc.want)
			}
		})
	}
}

// BenchmarkGobreakerTwoStep is the baseline for BenchmarkAllowReport:
// gobreaker's own Allow and done, which take its lock and read the clock
// twice.
func BenchmarkGobreakerTwoStep(b *testing.B) {
	cb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{Interval: 30 * time.Second, BucketPeriod: 3 * time.Second})
	b.ReportAllocs()
	for b.Loop() {
		done, _ := cb.Allow()
		done(nil)
	}
}

// Attempts that last longer than the window still count: a target whose
// attempts all fail slowly (hangs cut by a 40s Timeout, say) opens.
func TestSlowFailuresOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
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
		b := mustNew(t, breaker.Config{})
		stale, err := b.Allow() // healthy path; a long generation starts
		if err != nil {
			t.Fatal(err)
		}
		reportN(t, b, retry.Failure, 5)
		wantState(t, b, breaker.Open, "setup: not open")
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
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1000, OpenFor: 5 * time.Second})
		for range 20 {
			if tk, err := b.Allow(); err == nil {
				tk.Report(retry.Failure)
			}
		}
		wantState(t, b, breaker.Open, "setup: 20 of 20 failures should open by ratio")
		time.Sleep(5*time.Second + time.Millisecond)
		report(t, b, retry.NotFailure) // the probe succeeds: closed
		reportN(t, b, retry.NotFailure, 9)
		report(t, b, retry.Failure) // 1 failure in 10 calls since recovery
		if b.State() != breaker.Closed {
			t.Fatalf("one failure out of 10 since recovery reopened the breaker (%v)", b.State())
		}
	})
}

// A quiet target failing every call, one call every 4s (under the 20 calls
// in 30s the ratio needs), opens after 5 consecutive failures: they do not
// decay with time.
func TestSlowConsecutiveFailuresOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		for range 20 {
			tk, err := b.Allow()
			if err != nil {
				return
			}
			tk.Report(retry.Failure)
			time.Sleep(4 * time.Second)
		}
		t.Fatalf("20 consecutive failures, 4s apart, and the breaker is still %v", b.State())
	})
}

// BenchmarkAllowHealthy is Allow alone on the healthy path (closed, no
// failure since the last success): no lock, no clock read, no allocation.
func BenchmarkAllowHealthy(b *testing.B) {
	br := mustNew(b, breaker.Config{})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := br.Allow(); err != nil {
			b.Fatal(err)
		}
	}
}

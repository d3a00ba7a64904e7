package breaker

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/retry"
	"github.com/sony/gobreaker/v2"
)

// callbackOrders are ways of calling a breaker's gobreaker callbacks that
// gobreaker's documentation allows (IsSuccessful classifies each outcome;
// ReadyToTrip is called whenever a request fails while closed), applied
// to a real gobreaker by wrapping the callbacks it is given. gobreaker
// v2.4.0 calls IsSuccessful then ReadyToTrip, under its lock, in one
// afterRequest: a breaker must not depend on that.
var callbackOrders = []struct {
	name   string
	adjust func(*gobreaker.Settings)
}{
	{"as gobreaker calls them", nil},
	{"ReadyToTrip before IsSuccessful", func(st *gobreaker.Settings) {
		// gobreaker's own classification stands in for the breaker's until
		// ReadyToTrip has answered; the breaker's IsSuccessful is called
		// after it, with the same error.
		isSuccessful, readyToTrip := st.IsSuccessful, st.ReadyToTrip
		var last error // under gobreaker's lock
		st.IsSuccessful = func(err error) bool { last = err; return err == nil }
		st.ReadyToTrip = func(c gobreaker.Counts) bool {
			trip := readyToTrip(c)
			isSuccessful(last)
			return trip
		}
	}},
	{"IsSuccessful never called", func(st *gobreaker.Settings) {
		st.IsSuccessful = func(err error) bool { return err == nil }
	}},
	{"IsSuccessful called again on every outcome", func(st *gobreaker.Settings) {
		// As a caller's own classification might, on errors of its own.
		isSuccessful, readyToTrip := st.IsSuccessful, st.ReadyToTrip
		st.IsSuccessful = func(err error) bool {
			isSuccessful(errFailure)
			ok := isSuccessful(err)
			isSuccessful(nil)
			return ok
		}
		st.ReadyToTrip = func(c gobreaker.Counts) bool {
			isSuccessful(errFailure)
			return readyToTrip(c)
		}
	}},
}

// Issue 13: "a spend cap opens the breaker at once" must not depend on the
// order in which gobreaker calls IsSuccessful and ReadyToTrip. The breaker
// set a flag in IsSuccessful and read it in ReadyToTrip: with ReadyToTrip
// called first, a Trip did not open the breaker (and the flag left over
// made the next ordinary failure trip it); with IsSuccessful not called,
// no Trip did. Each order gobreaker's documentation allows must give the
// same breaker: a Trip opens it at once from the healthy path, from a
// breaker that has seen failures, and from a half-open probe; ordinary
// failures open it only at ConsecutiveFailures.
func TestTripOpensWhateverTheCallbackOrder(t *testing.T) {
	for _, order := range callbackOrders {
		t.Run(order.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := newBreaker("t", Config{ConsecutiveFailures: 3}, order.adjust)
				if err != nil {
					t.Fatal(err)
				}
				report := func(v retry.BreakerVerdict) {
					t.Helper()
					tk, err := b.Allow()
					if err != nil {
						t.Fatalf("Allow: %v", err)
					}
					tk.Report(v)
				}
				wantState := func(want State, when string) {
					t.Helper()
					if got := b.State(); got != want {
						t.Fatalf("%s: state %v; want %v", when, got, want)
					}
				}
				reopen := func() {
					t.Helper()
					time.Sleep(defaultOpenFor + time.Nanosecond)
					report(retry.NotFailure) // the probe closes it
					wantState(Closed, "after a successful probe")
				}

				report(retry.NotFailure)
				report(retry.Trip) // on the healthy path
				wantState(Open, "a Trip on the healthy path")
				reopen()

				report(retry.Failure)
				wantState(Closed, "one failure")
				report(retry.Trip) // with a failure counted already
				wantState(Open, "a Trip after a failure")
				reopen()

				// Nothing is left over from the Trips: ordinary failures
				// open the breaker at the third, not before.
				report(retry.Failure)
				report(retry.Failure)
				wantState(Closed, "two failures after Trips")
				report(retry.Failure)
				wantState(Open, "the third failure")

				// A Trip that fails the half-open probe reopens it.
				time.Sleep(defaultOpenFor + time.Nanosecond)
				report(retry.Trip)
				wantState(Open, "a Trip on the probe")
				reopen()

				// A Trip from a ticket issued before a state change opens
				// nothing: gobreaker ignores it (Counts ignores requests sent
				// before clearing), and so does the trip.
				stale, err := b.Allow()
				if err != nil {
					t.Fatal(err)
				}
				report(retry.Failure)
				report(retry.Failure)
				report(retry.Failure) // opens
				reopen()
				stale.Report(retry.Trip)
				wantState(Closed, "a stale ticket's Trip")
				if b.trips.Load() != 0 {
					t.Fatalf("trips = %d after the reports; want 0", b.trips.Load())
				}
			})
		})
	}
}

// Trips racing with failures and successes (run with -race): each Trip
// opens the breaker, and trips is back at 0 once every report is in.
func TestTripConcurrently(t *testing.T) {
	for _, order := range callbackOrders {
		t.Run(order.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, err := newBreaker("t", Config{ConsecutiveFailures: 1000, MinRequests: 1 << 30}, order.adjust)
				if err != nil {
					t.Fatal(err)
				}
				for round := range 5 {
					var wg sync.WaitGroup
					for g := range 8 {
						wg.Go(func() {
							for i := range 50 {
								tk, err := b.Allow()
								if err != nil {
									continue
								}
								switch {
								case g == 0 && i == 25:
									tk.Report(retry.Trip)
								case (g+i)%2 == 0:
									tk.Report(retry.Failure)
								default:
									tk.Report(retry.NotFailure)
								}
							}
						})
					}
					wg.Wait()
					if got := b.State(); got != Open {
						t.Fatalf("round %d: state %v after a Trip among failures; want open", round, got)
					}
					if n := b.trips.Load(); n != 0 {
						t.Fatalf("round %d: trips = %d; want 0", round, n)
					}
					time.Sleep(defaultOpenFor + time.Nanosecond)
					tk, err := b.Allow()
					if err != nil {
						t.Fatal(err)
					}
					tk.Report(retry.NotFailure)
				}
			})
		})
	}
}

// Should gobreaker register a failure in the closed state without asking
// ReadyToTrip (its documentation says it asks), a Trip still opens the
// breaker: trip registers one more failure.
func TestTripWhenReadyToTripIsNotAsked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		skip := true // the first ReadyToTrip of each Trip goes unasked
		b, err := newBreaker("t", Config{}, func(st *gobreaker.Settings) {
			readyToTrip := st.ReadyToTrip
			st.ReadyToTrip = func(c gobreaker.Counts) bool {
				if skip {
					skip = false
					return false
				}
				return readyToTrip(c)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		tk.Report(retry.Trip)
		if got := b.State(); got != Open || skip {
			t.Fatalf("state %v (first ReadyToTrip skipped: %v); want open", got, !skip)
		}
	})
}

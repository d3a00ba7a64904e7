package breaker

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/retry"
	"github.com/sony/gobreaker/v2"
)

// gobreaker's Timeout is FirstOpenFor: once it has passed, any call into
// gobreaker (a report reaching it, say) may move it to half-open while a
// longer opening holds the breaker open. The breaker then stays open:
// Allow, Probe, State and Refusal say so and OnStateChange hears nothing
// until the opening's interval has passed. Once it has, OnStateChange hears
// of the move to half-open before what follows it, whichever call comes
// first: State, Allow or Probe (which tell it themselves), or a report
// that reaches gobreaker directly (whose own change tells it first).
func TestEarlyHalfOpenIsHeldUntilTheInterval(t *testing.T) {
	for _, first := range []string{"State", "Allow", "Probe", "gobreaker"} {
		t.Run(first, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var got []string
				b, err := New("t", Config{ConsecutiveFailures: 1, OpenFor: time.Minute, OnStateChange: func(_ string, from, to State) {
					got = append(got, from.String()+">"+to.String())
				}})
				if err != nil {
					t.Fatal(err)
				}
				want := func(when string, w ...string) {
					t.Helper()
					if !slices.Equal(got, w) {
						t.Fatalf("%s: transitions %q; want %q", when, got, w)
					}
				}
				allow := func() {
					t.Helper()
					tk, err := b.Allow()
					if err != nil {
						t.Fatal(err)
					}
					tk.Report(retry.Failure)
				}
				allow()                                           // opens for 5s
				time.Sleep(defaultFirstOpenFor + time.Nanosecond) // due
				allow()                                           // the probe fails: open for 10s
				opened := time.Now()
				take := func() {
					if _, ok := b.takeChange(); !ok {
						t.Fatal("no change to take after the probe failed")
					}
				}
				take()
				time.Sleep(defaultFirstOpenFor + time.Second) // past gobreaker's Timeout, within the 10s
				if s := b.cb.State(); s != gobreaker.StateHalfOpen {
					t.Fatalf("setup: gobreaker is %v; want half-open", s)
				}
				want("gobreaker half-open early", "closed>open", "open>half-open", "half-open>open")
				if s := b.State(); s != Open {
					t.Fatalf("State() = %v; want open until the interval has passed", s)
				}
				if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
					t.Fatalf("Allow = %v; want ErrOpen", err)
				}
				if _, err := b.Probe(); !errors.Is(err, errNotDue) {
					t.Fatalf("Probe = %v; want not due", err)
				}
				if b.Closed() || !errors.Is(b.Refusal(), ErrOpen) {
					t.Fatalf("Closed() %v, Refusal() %v; want false, ErrOpen", b.Closed(), b.Refusal())
				}
				if at := b.ProbeAt(); !at.Equal(opened.Add(10*time.Second + 1)) {
					t.Fatalf("ProbeAt() = %v after the opening; want 10s and the instant after", at.Sub(opened))
				}
				if _, ok := b.takeChange(); ok {
					t.Fatal("the early move to half-open was taken as a change")
				}
				time.Sleep(time.Until(b.ProbeAt()) + time.Nanosecond)

				switch first {
				case "State":
					if s := b.State(); s != HalfOpen {
						t.Fatalf("State() once due = %v; want half-open", s)
					}
				case "Allow":
					allow()
				case "Probe":
					tk, err := b.Probe()
					if err != nil {
						t.Fatal(err)
					}
					tk.Report(retry.Failure)
				case "gobreaker":
					done, err := b.cb.Allow() // as a report that reaches it directly
					if err != nil {
						t.Fatal(err)
					}
					done(errFailure)
				}
				if first == "State" {
					want("once due", "closed>open", "open>half-open", "half-open>open", "open>half-open")
					return
				}
				want("the probe failed", "closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>open")
				if d := b.OpenInterval(); d != 20*time.Second {
					t.Fatalf("OpenInterval() = %v; want 20s", d)
				}
				if s, ok := b.takeChange(); s != Open || !ok {
					t.Fatalf("takeChange() = %v, %v; want open", s, ok)
				}
			})
		})
	}
}

package breaker_test

// Direct tests of Breaker.Wait: a caller with nowhere else to go waits for
// the breaker's probe and its outcome, and is released on the slow-start
// ramp once the probe succeeds. All times are the synctest bubble's.

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/retry"
	"go.uber.org/goleak"
)

// waited is what one call of Wait returned, and when (since origin).
type waited struct {
	i   int
	tk  breaker.Ticket
	err error
	at  time.Duration
}

// openBreaker returns a breaker with cfg (opening on one failure) that has
// just opened, and when it opened.
func openBreaker(t *testing.T, cfg breaker.Config) (*breaker.Breaker, time.Time) {
	t.Helper()
	cfg.ConsecutiveFailures = 1
	b := mustNew(t, cfg)
	report(t, b, retry.Failure)
	wantState(t, b, breaker.Open, "after a failure with ConsecutiveFailures 1")
	return b, time.Now()
}

// startWaiters starts n callers of b.Wait(ctx) and returns the channel on
// which each tells what it got, with the time since origin.
func startWaiters(ctx context.Context, b *breaker.Breaker, n int, origin time.Time) <-chan waited {
	out := make(chan waited, n)
	for i := range n {
		go func() {
			tk, err := b.Wait(ctx)
			out <- waited{i: i, tk: tk, err: err, at: time.Since(origin)}
		}()
	}
	return out
}

// drain returns what is on ch now, once every goroutine of the bubble is
// blocked.
func drain(ch <-chan waited) []waited {
	synctest.Wait()
	var got []waited
	for {
		select {
		case w := <-ch:
			got = append(got, w)
		default:
			return got
		}
	}
}

// releaseTimes returns the times of ws, sorted, after checking each got a
// ticket.
func releaseTimes(t *testing.T, ws []waited) []time.Duration {
	t.Helper()
	var at []time.Duration
	for _, w := range ws {
		if w.err != nil {
			t.Fatalf("waiter %d: Wait = %v at %v; want a ticket", w.i, w.err, w.at)
		}
		at = append(at, w.at)
	}
	slices.Sort(at)
	return at
}

// rampOf returns the release times of n waiters on the slow-start ramp:
// 1 at once, then 2, 4, 8, ... each RampStep.
func rampOf(n int) []time.Duration {
	var at []time.Duration
	for step, width := 0, 1; len(at) < n; step, width = step+1, width*2 {
		for range min(width, n-len(at)) {
			at = append(at, time.Duration(step)*breaker.RampStep)
		}
	}
	return at
}

func wantRefused(t *testing.T, ws []waited, at time.Duration, why string) {
	t.Helper()
	for _, w := range ws {
		if !errors.Is(w.err, breaker.ErrOpen) || w.tk.Held() || w.at != at {
			t.Fatalf("%s: waiter %d got %v (ticket held %v) at %v; want ErrOpen at %v", why, w.i, w.err, w.tk.Held(), w.at, at)
		}
	}
}

// A closed breaker, or a disabled one, lets the caller through at once.
func TestWaitClosedReturnsATicketAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		b := mustNew(t, breaker.Config{})
		tk, err := b.Wait(t.Context())
		if err != nil || time.Since(start) != 0 {
			t.Fatalf("Wait on a closed breaker = %v after %v; want a ticket at once", err, time.Since(start))
		}
		tk.Report(retry.NotFailure)
		wantState(t, b, breaker.Closed, "after a success")

		d := mustNew(t, breaker.Config{Disabled: true})
		if tk, err := d.Wait(t.Context()); err != nil || tk.Held() || time.Since(start) != 0 {
			t.Fatalf("Wait on a disabled breaker = %v (held %v); want a zero ticket at once", err, tk.Held())
		}
	})
}

// A caller whose deadline comes no later than ProbeAt cannot see the
// probe's outcome: Wait fails fast, as Allow does. One whose deadline comes
// a nanosecond later waits for the probe.
func TestWaitDeadlineBeforeProbeAtFailsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, opened := openBreaker(t, breaker.Config{})
		due := b.ProbeAt()
		if want := opened.Add(breaker.DefaultOpenFor + 1); !due.Equal(want) {
			t.Fatalf("ProbeAt() = %v after the opening; want %v", due.Sub(opened), want.Sub(opened))
		}
		for _, dl := range []time.Time{opened.Add(time.Second), due.Add(-1), due} {
			ctx, cancel := context.WithDeadline(t.Context(), dl)
			tk, err := b.Wait(ctx)
			cancel()
			if !errors.Is(err, breaker.ErrOpen) || tk.Held() || time.Since(opened) != 0 {
				t.Fatalf("deadline %v after the opening: Wait = %v after %v; want ErrOpen at once", dl.Sub(opened), err, time.Since(opened))
			}
		}

		// A nanosecond more: it waits, and takes the probe at ProbeAt.
		ctx, cancel := context.WithDeadline(t.Context(), due.Add(1))
		defer cancel()
		tk, err := b.Wait(ctx)
		if err != nil || !tk.Held() || !time.Now().Equal(due) {
			t.Fatalf("deadline past ProbeAt: Wait = %v (held %v) after %v; want the probe at %v", err, tk.Held(), time.Since(opened), due.Sub(opened))
		}
		tk.Report(retry.NotFailure)
		wantState(t, b, breaker.Closed, "after the probe succeeded")
	})
}

// Without ActiveProbe, the first waiter to ask once the probe is due takes
// the probe; the others wait for its outcome. A probe that succeeds
// releases them on the slow-start ramp: 1 at once, then 2, 4, 8 each
// RampStep, a ticket each.
func TestWaitProbeSucceedsReleasesOnTheRamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 16 // the probe, then 15 released 1+2+4+8
		b, opened := openBreaker(t, breaker.Config{})
		due := b.ProbeAt()
		results := startWaiters(t.Context(), b, n, opened)
		if got := drain(results); len(got) != 0 {
			t.Fatalf("%d waiters returned while open, first %v; want all waiting", len(got), got[0].err)
		}

		time.Sleep(due.Sub(opened))
		got := drain(results)
		if len(got) != 1 || got[0].err != nil || !got[0].tk.Held() || got[0].at != due.Sub(opened) {
			t.Fatalf("at ProbeAt: %d waiters returned (%v); want one, with the probe's ticket", len(got), got)
		}
		probe := got[0].tk
		if s := b.State(); s != breaker.HalfOpen {
			t.Fatalf("State() with the probe in flight = %v; want half-open", s)
		}

		// The probe takes 2s; the others keep waiting.
		time.Sleep(2 * time.Second)
		if got := drain(results); len(got) != 0 {
			t.Fatalf("%d waiters returned with the probe in flight; want none", len(got))
		}
		closedAt := time.Now()
		probe.Report(retry.NotFailure)
		wantState(t, b, breaker.Closed, "after the probe succeeded")

		time.Sleep(time.Minute)
		got = drain(results)
		if len(got) != n-1 {
			t.Fatalf("%d of %d waiters returned a minute after the probe succeeded", len(got), n-1)
		}
		at := releaseTimes(t, got)
		for i := range at {
			at[i] -= closedAt.Sub(opened)
		}
		if want := rampOf(n - 1); !slices.Equal(at, want) {
			t.Fatalf("released at %v after the close; want %v", at, want)
		}
		for _, w := range got {
			w.tk.Report(retry.NotFailure)
		}
		wantState(t, b, breaker.Closed, "after the released attempts succeeded")
	})
}

// A probe that fails opens the breaker again: the waiters return ErrOpen
// at once, without waiting for the next probe.
func TestWaitProbeFailsRefusesTheWaitersAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 5
		b, opened := openBreaker(t, breaker.Config{})
		due := b.ProbeAt()
		results := startWaiters(t.Context(), b, n, opened)
		time.Sleep(due.Sub(opened))
		got := drain(results)
		if len(got) != 1 || got[0].err != nil || !got[0].tk.Held() {
			t.Fatalf("at ProbeAt: %d waiters returned (%v); want one, with the probe's ticket", len(got), got)
		}
		time.Sleep(time.Second)
		failedAt := time.Since(opened)
		got[0].tk.Report(retry.Failure)
		wantState(t, b, breaker.Open, "after the probe failed")
		got = drain(results)
		if len(got) != n-1 {
			t.Fatalf("%d of %d waiters returned when the probe failed; want all", len(got), n-1)
		}
		wantRefused(t, got, failedAt, "the probe failed")
	})
}

// With ActiveProbe no waiter probes: they wait for the probe that someone
// else (the chain's prober) takes with Probe and reports, and are released
// on the ramp when it succeeds, refused at once when it fails.
func TestWaitActiveProbe(t *testing.T) {
	for _, tc := range []struct {
		name    string
		verdict retry.BreakerVerdict
	}{{"succeeds", retry.NotFailure}, {"fails", retry.Failure}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 7 // released 1+2+4
				b, opened := openBreaker(t, breaker.Config{ActiveProbe: true})
				due := b.ProbeAt()
				results := startWaiters(t.Context(), b, n, opened)
				time.Sleep(due.Sub(opened))
				if got := drain(results); len(got) != 0 {
					t.Fatalf("%d waiters returned at ProbeAt with ActiveProbe (first %v); want none: none of them probes", len(got), got[0].err)
				}
				// The prober comes 3s late; the waiters still wait.
				time.Sleep(3 * time.Second)
				if got := drain(results); len(got) != 0 {
					t.Fatalf("%d waiters returned before the probe; want none", len(got))
				}
				probe, err := b.Probe()
				if err != nil {
					t.Fatalf("Probe once due: %v", err)
				}
				time.Sleep(time.Second)
				if got := drain(results); len(got) != 0 {
					t.Fatalf("%d waiters returned with the probe in flight; want none", len(got))
				}
				reportedAt := time.Since(opened)
				probe.Report(tc.verdict)
				time.Sleep(time.Minute)
				got := drain(results)
				if len(got) != n {
					t.Fatalf("%d of %d waiters returned a minute after the probe reported", len(got), n)
				}
				if tc.verdict != retry.NotFailure {
					wantRefused(t, got, reportedAt, "the probe failed")
					return
				}
				at := releaseTimes(t, got)
				for i := range at {
					at[i] -= reportedAt
				}
				if want := rampOf(n); !slices.Equal(at, want) {
					t.Fatalf("released at %v after the close; want %v", at, want)
				}
				for _, w := range got {
					w.tk.Report(retry.NotFailure)
				}
			})
		})
	}
}

// A probe whose outcome never comes (its request hangs, or with
// ActiveProbe nobody sends one) does not hold the waiters past
// MaxProbeWait after ProbeAt: they return ErrOpen then.
func TestWaitGivesUpMaxProbeWaitAfterProbeAt(t *testing.T) {
	for _, active := range []bool{false, true} {
		name := "probe hangs"
		if active {
			name = "ActiveProbe, nobody probes"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 4
				b, opened := openBreaker(t, breaker.Config{ActiveProbe: active})
				due := b.ProbeAt()
				results := startWaiters(t.Context(), b, n, opened)
				time.Sleep(due.Sub(opened))
				waiting := n
				if got := drain(results); !active {
					if len(got) != 1 || got[0].err != nil || !got[0].tk.Held() {
						t.Fatalf("at ProbeAt: %d waiters returned (%v); want one, with the probe's ticket", len(got), got)
					}
					waiting-- // its ticket is never reported
				} else if len(got) != 0 {
					t.Fatalf("%d waiters returned at ProbeAt with ActiveProbe; want none", len(got))
				}
				giveUp := due.Add(breaker.MaxProbeWait).Sub(opened)
				time.Sleep(giveUp - time.Since(opened) - 1)
				if got := drain(results); len(got) != 0 {
					t.Fatalf("%d waiters returned a nanosecond before ProbeAt+MaxProbeWait (first at %v); want none", len(got), got[0].at)
				}
				time.Sleep(1)
				got := drain(results)
				if len(got) != waiting {
					t.Fatalf("%d of %d waiters returned at ProbeAt+MaxProbeWait", len(got), waiting)
				}
				wantRefused(t, got, giveUp, "no outcome within MaxProbeWait")
			})
		})
	}
}

// A caller whose context ends while it waits, for the probe or for its
// place on the ramp, returns ErrOpen then.
func TestWaitContextCanceled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, opened := openBreaker(t, breaker.Config{})
		ctx, cancel := context.WithCancel(t.Context())
		results := startWaiters(ctx, b, 3, opened)
		time.Sleep(2 * time.Second)
		cancel()
		wantRefused(t, drain(results), 2*time.Second, "canceled before ProbeAt")

		// Past ProbeAt, the probe in flight: canceled while polling.
		due := b.ProbeAt()
		time.Sleep(time.Until(due))
		probe, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow once due: %v", err)
		}
		ctx, cancel = context.WithCancel(t.Context())
		results = startWaiters(ctx, b, 3, opened)
		time.Sleep(1234 * time.Millisecond)
		canceledAt := time.Since(opened)
		cancel()
		wantRefused(t, drain(results), canceledAt, "canceled with the probe in flight")

		// On the ramp: 7 waiters, released at 0, 250ms (2) and 500ms (4);
		// those canceled at 100ms return then.
		ctx, cancel = context.WithCancel(t.Context())
		results = startWaiters(ctx, b, 7, opened)
		synctest.Wait()
		closedAt := time.Since(opened)
		probe.Report(retry.NotFailure)
		time.Sleep(100 * time.Millisecond)
		cancel()
		got := drain(results)
		if len(got) != 7 {
			t.Fatalf("%d of 7 waiters returned once canceled on the ramp", len(got))
		}
		var released, refused []waited
		for _, w := range got {
			if w.err == nil {
				released = append(released, w)
				w.tk.Report(retry.NotFailure)
			} else {
				refused = append(refused, w)
			}
		}
		if len(released) != 1 || released[0].at != closedAt {
			t.Fatalf("%d waiters released before the cancel; want the first on the ramp, at the close", len(released))
		}
		wantRefused(t, refused, closedAt+100*time.Millisecond, "canceled on the ramp")
	})
}

// A waiter whose place on the ramp comes after its context's deadline does
// not queue: it is let through at once, having no time to wait.
func TestWaitRampDeadlineSoonerGoesAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, opened := openBreaker(t, breaker.Config{ActiveProbe: true})
		long := startWaiters(t.Context(), b, 15, opened)
		ctx, cancel := context.WithDeadline(t.Context(), b.ProbeAt().Add(10*time.Second))
		defer cancel()
		time.Sleep(time.Until(b.ProbeAt()))
		probe, err := b.Probe()
		if err != nil {
			t.Fatalf("Probe once due: %v", err)
		}
		if got := drain(long); len(got) != 0 {
			t.Fatalf("%d waiters returned with the probe taken; want none", len(got))
		}
		short := startWaiters(ctx, b, 1, opened)
		time.Sleep(10*time.Second - 100*time.Millisecond) // the short deadline is 100ms away
		synctest.Wait()
		closedAt := time.Since(opened)
		probe.Report(retry.NotFailure)
		got := drain(short)
		if len(got) != 1 || got[0].err != nil || got[0].at != closedAt {
			t.Fatalf("short deadline: %v; want a ticket at the close", got)
		}
		got[0].tk.Report(retry.NotFailure)
		// The others take the other places of the ramp of 16: which place
		// the short one took is the scheduler's choice.
		time.Sleep(time.Minute)
		at := releaseTimes(t, drain(long))
		places := rampOf(16)
		for _, d := range at {
			i := slices.Index(places, d-closedAt)
			if i < 0 {
				t.Fatalf("the 15 others released at %v after the close; want places of the ramp %v", at, rampOf(16))
			}
			places = slices.Delete(places, i, i+1)
		}
		if len(at) != 15 {
			t.Fatalf("%d of 15 others released", len(at))
		}
	})
}

// A waiter whose place on the ramp comes after the breaker opened again
// gets ErrOpen at its place: the target failed again meanwhile. It does
// not take the next probe either, even when that is due by its place (an
// open interval of 200ms, shorter than the ramp).
func TestWaitRampReopenedMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 8 // the probe, then 7 on the ramp: 1+2+4
		b, opened := openBreaker(t, breaker.Config{OpenFor: 200 * time.Millisecond})
		results := startWaiters(t.Context(), b, n, opened)
		time.Sleep(time.Until(b.ProbeAt()))
		got := drain(results)
		if len(got) != 1 || got[0].err != nil || !got[0].tk.Held() {
			t.Fatalf("at ProbeAt: %v; want one waiter with the probe", got)
		}
		closedAt := time.Since(opened)
		got[0].tk.Report(retry.NotFailure)
		got = drain(results)
		if len(got) != 1 || got[0].err != nil || got[0].at != closedAt {
			t.Fatalf("at the close: %v; want the first on the ramp let through", got)
		}
		// Its attempt fails 100ms later: open again (one failure), until
		// 300ms after the close; the next probe is due before the 500ms
		// places.
		time.Sleep(100 * time.Millisecond)
		got[0].tk.Report(retry.Failure)
		wantState(t, b, breaker.Open, "after the first released attempt failed")
		time.Sleep(time.Minute)
		got = drain(results)
		if len(got) != n-2 {
			t.Fatalf("%d of %d waiters returned", len(got), n-2)
		}
		var at []time.Duration
		for _, w := range got {
			if !errors.Is(w.err, breaker.ErrOpen) || w.tk.Held() {
				t.Fatalf("waiter %d released %v after the close, the breaker opened again: %v (held %v); want ErrOpen", w.i, w.at-closedAt, w.err, w.tk.Held())
			}
			at = append(at, w.at-closedAt)
		}
		slices.Sort(at)
		if want := rampOf(n - 1)[1:]; !slices.Equal(at, want) {
			t.Fatalf("refused at %v after the close; want at their places, %v", at, want)
		}
	})
}

// Every goroutine a test of Wait starts ends with it, whatever ended the
// wait; Wait itself starts none.
func TestWaitLeavesNoGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, opened := openBreaker(t, breaker.Config{})
		ctx, cancel := context.WithCancel(t.Context())
		canceled := startWaiters(ctx, b, 3, opened)
		results := startWaiters(t.Context(), b, 5, opened)
		time.Sleep(time.Second)
		cancel()
		if got := drain(canceled); len(got) != 3 {
			t.Fatalf("%d of 3 canceled waiters returned", len(got))
		}
		time.Sleep(time.Until(b.ProbeAt()) + breaker.MaxProbeWait) // the probe's ticket is never reported
		if got := drain(results); len(got) != 5 {
			t.Fatalf("%d of 5 waiters returned by ProbeAt+MaxProbeWait", len(got))
		}
	})
	goleak.VerifyNone(t)
}

package breaker_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/backstop-llm/backstop/retry"
)

// nopStore is a breaker.Store that is never asked anything: the tests of
// what a Shared applies to a breaker or a gate need its Slack only.
type nopStore struct{}

func (nopStore) Key() string { return "k" }
func (nopStore) Load(context.Context) ([]remote.Published, string, error) {
	panic("nopStore: Load")
}
func (nopStore) PublishOpen(context.Context, string, time.Duration) (string, error) {
	panic("nopStore: PublishOpen")
}
func (nopStore) PublishClosed(context.Context, string) (string, error) {
	panic("nopStore: PublishClosed")
}
func (nopStore) PublishGate(context.Context, string, time.Duration) (string, error) {
	panic("nopStore: PublishGate")
}

// sharing returns a Shared whose Slack is slack, or the least a Shared has
// (a nanosecond's Timeout, plus a millisecond) when slack is shorter.
func sharing(t testing.TB, slack time.Duration) *breaker.Shared {
	t.Helper()
	s, err := breaker.NewShared(nopStore{}, breaker.SharedConfig{Timeout: max(slack-time.Millisecond, time.Nanosecond)})
	if err != nil {
		t.Fatal(err)
	}
	if slack >= time.Millisecond+time.Nanosecond && s.SlackBound() != slack {
		t.Fatalf("Slack() = %v; want %v", s.SlackBound(), slack)
	}
	return s
}

// stateChanges is b's count of state changes, as Shared.Sync reads it
// before its Load.
func stateChanges(b *breaker.Breaker) uint64 { return breaker.ChangesForTest(b) }

// openElsewhere is what Shared.Sync applies to b for a publication read
// until until, on a Shared whose Slack is slack (see sharing).
func openElsewhere(t testing.TB, b *breaker.Breaker, until time.Time, asOf uint64, slack time.Duration) {
	t.Helper()
	sharing(t, slack).OpenElsewhereForTest(b, until, asOf)
}

// closeElsewhere is what Shared.Sync applies to g for a closure read until
// until, on a Shared whose Slack is slack (see sharing).
func closeElsewhere(t testing.TB, g *breaker.Gate, until time.Time, limit, slack time.Duration) {
	t.Helper()
	sharing(t, slack).CloseElsewhereForTest(g, until, limit)
}

// heldElsewhere fails the test unless b refuses attempts because another
// replica holds it open: Allow's error matches ErrOpenElsewhere and ErrOpen,
// Closed is false and State is Open.
func heldElsewhere(t *testing.T, b *breaker.Breaker, when string) {
	t.Helper()
	tk, err := b.Allow()
	if !errors.Is(err, breaker.ErrOpenElsewhere) || !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("%s: Allow = %v; want an error matching ErrOpenElsewhere and ErrOpen", when, err)
	}
	if tk.Held() {
		t.Fatalf("%s: a refused Allow returned a held ticket", when)
	}
	if b.Closed() {
		t.Fatalf("%s: Closed() while another replica holds the breaker open", when)
	}
	if s := b.State(); s != breaker.Open {
		t.Fatalf("%s: State() = %v; want open", when, s)
	}
}

// notHeld fails the test unless b is closed and lets an attempt through.
func notHeld(t *testing.T, b *breaker.Breaker, when string) {
	t.Helper()
	if !b.Closed() || b.State() != breaker.Closed {
		t.Fatalf("%s: Closed() %v, State() %v; want closed", when, b.Closed(), b.State())
	}
	tk, err := b.Allow()
	if err != nil {
		t.Fatalf("%s: Allow = %v; want the attempt through", when, err)
	}
	tk.Report(retry.NotFailure)
}

// take fails the test unless the change Shared.Publish takes from b is
// want (ok false for none).
func take(t *testing.T, b *breaker.Breaker, want breaker.State, wantOK bool, when string) {
	t.Helper()
	got, ok := breaker.TakeChangeForTest(b)
	if got != want || ok != wantOK {
		t.Fatalf("%s: TakeChange() = %v, %v; want %v, %v", when, got, ok, want, wantOK)
	}
}

func TestOpenElsewhereOnAClosedBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var changes int
		// OpenFor an hour: the publications below stay within its cap.
		b := mustNew(t, breaker.Config{OpenFor: time.Hour, OnStateChange: func(string, breaker.State, breaker.State) { changes++ }})
		notHeld(t, b, "before")
		const d = 10 * time.Second
		openElsewhere(t, b, time.Now().Add(d), stateChanges(b), 0)
		heldElsewhere(t, b, "right after OpenElsewhere")
		time.Sleep(d - time.Nanosecond)
		heldElsewhere(t, b, "just before it ends")
		time.Sleep(time.Nanosecond)
		notHeld(t, b, "once it has ended")

		// The refusals counted nothing against the target: no state change
		// happened, and the breaker is still on the healthy path.
		if changes != 0 {
			t.Fatalf("%d state changes; want none", changes)
		}
		take(t, b, 0, false, "after refusals")
		for range 4 {
			report(t, b, retry.Failure)
		}
		if b.State() != breaker.Closed {
			t.Fatal("opened before the 5th failure: the refusals were counted as failures")
		}

		// A zero time ends it at once.
		openElsewhere(t, b, time.Now().Add(time.Hour), stateChanges(b), 0)
		heldElsewhere(t, b, "held for an hour")
		openElsewhere(t, b, time.Time{}, stateChanges(b), 0)
		if !b.Closed() || b.State() != breaker.Closed {
			t.Fatalf("after OpenElsewhere(zero): Closed() %v, State() %v; want closed", b.Closed(), b.State())
		}
		if _, err := b.Allow(); err != nil {
			t.Fatalf("after OpenElsewhere(zero): Allow = %v", err)
		}
		openElsewhere(t, b, time.Time{}, stateChanges(b), 0) // ending nothing is harmless

		// A later call replaces an earlier one, sooner or later.
		openElsewhere(t, b, time.Now().Add(time.Hour), stateChanges(b), 0)
		openElsewhere(t, b, time.Now().Add(time.Minute), stateChanges(b), 0)
		time.Sleep(time.Minute)
		if !b.Closed() {
			t.Fatal("a later, shorter OpenElsewhere did not replace the earlier one")
		}
		openElsewhere(t, b, time.Now().Add(time.Minute), stateChanges(b), 0)
		openElsewhere(t, b, time.Now().Add(time.Hour), stateChanges(b), 0)
		time.Sleep(time.Minute)
		heldElsewhere(t, b, "a later, longer OpenElsewhere")

		// A time already passed holds nothing.
		openElsewhere(t, b, time.Now().Add(-time.Second), stateChanges(b), 0)
		if !b.Closed() {
			t.Fatal("an OpenElsewhere in the past holds the breaker open")
		}
	})
}

func TestOpenElsewhereIgnoredByADisabledBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{Disabled: true})
		openElsewhere(t, b, time.Now().Add(time.Hour), stateChanges(b), 0)
		if _, err := b.Allow(); err != nil {
			t.Fatalf("disabled breaker: Allow = %v", err)
		}
		if !b.Closed() || b.State() != breaker.Closed {
			t.Fatalf("disabled breaker: Closed() %v, State() %v; want closed", b.Closed(), b.State())
		}
		openElsewhere(t, b, time.Time{}, stateChanges(b), 0)
		if _, err := b.Allow(); err != nil {
			t.Fatalf("disabled breaker: Allow = %v", err)
		}
	})
}

// Once the breaker is open or half-open itself, its own state decides: the
// replica that opened it (and reads its own publication back) sends its
// probe.
func TestOpenElsewhereYieldsToTheBreakersOwnState(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		for range 5 {
			report(t, b, retry.Failure)
		}
		if b.State() != breaker.Open {
			t.Fatal("setup: not open after 5 failures")
		}
		openElsewhere(t, b, time.Now().Add(2*breaker.DefaultOpenFor), stateChanges(b), 0) // its own publication, read back
		_, err := b.Allow()
		if !errors.Is(err, breaker.ErrOpen) || errors.Is(err, breaker.ErrOpenElsewhere) {
			t.Fatalf("open: Allow = %v; want this breaker's own ErrOpen", err)
		}
		if b.Closed() || b.State() != breaker.Open {
			t.Fatalf("open: Closed() %v, State() %v; want open", b.Closed(), b.State())
		}
		time.Sleep(breaker.DefaultOpenFor + time.Nanosecond)
		probe, err := b.Allow()
		if err != nil {
			t.Fatalf("the half-open probe was refused while OpenElsewhere is set: %v", err)
		}
		if b.State() != breaker.HalfOpen {
			t.Fatalf("State() = %v during the probe; want half-open", b.State())
		}
		if _, err := b.Allow(); !errors.Is(err, breaker.ErrOpen) || errors.Is(err, breaker.ErrOpenElsewhere) {
			t.Fatalf("a second attempt during the probe: %v; want this breaker's own ErrOpen", err)
		}
		probe.Report(retry.Failure) // reopens
		time.Sleep(breaker.DefaultOpenFor + time.Nanosecond)
		probe, err = b.Allow()
		if err != nil {
			t.Fatalf("the second probe was refused while OpenElsewhere is set: %v", err)
		}
		probe.Report(retry.NotFailure)
		// Closed by its own probe: that is fresher than any publication read
		// before, so the breaker forgets it (the replica withdraws its own
		// publication next); a publication read after holds it again.
		notHeld(t, b, "closed by its own probe")
		openElsewhere(t, b, time.Now().Add(time.Hour), stateChanges(b), 0)
		heldElsewhere(t, b, "a publication read after the probe")
		openElsewhere(t, b, time.Time{}, stateChanges(b), 0)
		notHeld(t, b, "after OpenElsewhere(zero)")
	})
}

func TestTakeChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{})
		take(t, b, 0, false, "new breaker")
		for range 10 {
			report(t, b, retry.NotFailure)
		}
		take(t, b, 0, false, "after successes")
		for range 4 {
			report(t, b, retry.Failure)
		}
		take(t, b, 0, false, "after failures that did not open it")
		report(t, b, retry.Failure)
		take(t, b, breaker.Open, true, "after it opened")
		take(t, b, 0, false, "taken already")

		// The probe succeeds: the last change, Closed, is what is taken.
		time.Sleep(breaker.DefaultOpenFor + time.Nanosecond)
		report(t, b, retry.NotFailure)
		take(t, b, breaker.Closed, true, "after the probe succeeded")
		take(t, b, 0, false, "taken already")

		// The probe fails: HalfOpen, then Open again.
		report(t, b, retry.Trip)
		take(t, b, breaker.Open, true, "after a Trip")
		time.Sleep(breaker.DefaultOpenFor + time.Nanosecond)
		probe, err := b.Allow()
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		take(t, b, breaker.HalfOpen, true, "during the probe")
		probe.Report(retry.Failure)
		take(t, b, breaker.Open, true, "after the probe failed")
		take(t, b, 0, false, "taken already")

		// A refusal by OpenElsewhere is no change.
		time.Sleep(breaker.DefaultOpenFor + time.Nanosecond)
		report(t, b, retry.NotFailure)
		take(t, b, breaker.Closed, true, "closed again")
		openElsewhere(t, b, time.Now().Add(time.Minute), stateChanges(b), 0)
		_, _ = b.Allow()
		take(t, b, 0, false, "held open elsewhere")
	})
}

func TestTakeChangeDisabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{Disabled: true})
		for range 20 {
			report(t, b, retry.Trip)
			report(t, b, retry.Failure)
		}
		time.Sleep(time.Hour)
		report(t, b, retry.NotFailure)
		take(t, b, 0, false, "disabled breaker")
	})
}

// The healthy path, with no publication from another replica, still
// allocates nothing; nor once a publication has ended.
func TestHealthyPathDoesNotAllocateWithShared(t *testing.T) {
	b := mustNew(t, breaker.Config{})
	attempt := func() {
		tk, err := b.Allow()
		if err != nil {
			panic(err)
		}
		tk.ReportAt(retry.NotFailure, time.Now())
	}
	if a := testing.AllocsPerRun(1000, attempt); a != 0 {
		t.Errorf("Allow+ReportAt allocates %v times; want 0", a)
	}
	openElsewhere(t, b, time.Now().Add(time.Hour), stateChanges(b), 0)
	openElsewhere(t, b, time.Time{}, stateChanges(b), 0)
	if a := testing.AllocsPerRun(1000, attempt); a != 0 {
		t.Errorf("Allow+ReportAt allocates %v times after OpenElsewhere ended; want 0", a)
	}
	openElsewhere(t, b, time.Now().Add(-time.Second), stateChanges(b), 0)
	if a := testing.AllocsPerRun(1000, attempt); a != 0 {
		t.Errorf("Allow+ReportAt allocates %v times after OpenElsewhere passed; want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() { _, _ = breaker.TakeChangeForTest(b) }); a != 0 {
		t.Errorf("TakeChange allocates %v times; want 0", a)
	}
}

// OpenElsewhere races with Allow, Closed, State and TakeChange safely (run
// with -race): every refusal is ErrOpenElsewhere and nothing is counted.
func TestOpenElsewhereConcurrently(t *testing.T) {
	b := mustNew(t, breaker.Config{})
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 500 {
				if (i+j)%3 == 0 {
					openElsewhere(t, b, time.Time{}, stateChanges(b), 0)
				} else {
					openElsewhere(t, b, time.Now().Add(time.Duration(j%5)*time.Millisecond), stateChanges(b), 0)
				}
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for range 500 {
				_ = b.Closed()
				_ = b.State()
				if _, ok := breaker.TakeChangeForTest(b); ok {
					t.Error("TakeChange reported a change")
				}
				tk, err := b.Allow()
				if err != nil {
					if !errors.Is(err, breaker.ErrOpenElsewhere) {
						t.Errorf("Allow = %v; want nil or ErrOpenElsewhere", err)
					}
					continue
				}
				tk.Report(retry.NotFailure)
			}
		})
	}
	wg.Wait()
	openElsewhere(t, b, time.Time{}, stateChanges(b), 0)
	if !b.Closed() || b.State() != breaker.Closed {
		t.Fatalf("Closed() %v, State() %v; want closed", b.Closed(), b.State())
	}
}

// A gate closed by another replica's Retry-After says so; a later local
// closure, or a local one that ends later, is the gate's own again.
func TestGateClosedElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var g breaker.Gate
		closeElsewhere(t, &g, time.Now().Add(time.Minute), 0, 0)
		until, err := g.Refusal()
		if !errors.Is(err, breaker.ErrGateClosedElsewhere) || !errors.Is(err, breaker.ErrGateClosed) || !until.Equal(time.Now().Add(time.Minute)) {
			t.Fatalf("Refusal = %v, %v; want ErrGateClosedElsewhere until a minute from now", until, err)
		}
		g.CloseUntil(time.Now().Add(time.Second)) // ends earlier: changes nothing
		if _, err := g.Refusal(); !errors.Is(err, breaker.ErrGateClosedElsewhere) {
			t.Fatalf("after a shorter local closure: %v", err)
		}
		g.CloseUntil(time.Now().Add(2 * time.Minute))
		if _, err := g.Refusal(); err != breaker.ErrGateClosed {
			t.Fatalf("after a longer local closure: %v; want ErrGateClosed", err)
		}
		time.Sleep(2 * time.Minute)
		if _, err := g.Refusal(); err != nil {
			t.Fatalf("after the closure: %v; want open", err)
		}
	})
}

// A publication holds the breaker open for at most twice its own OpenFor
// from when it was first read, however far ahead it ends: reading it again
// (its end estimated anew, within slack) extends nothing, during the cap or
// after it; one that ends later by more than slack is a new publication,
// capped afresh.
func TestOpenElsewhereCappedByOpenFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const openFor, slack = 10 * time.Second, 50 * time.Millisecond
		b := mustNew(t, breaker.Config{OpenFor: openFor})
		far := time.Now().Add(300 * 24 * time.Hour)
		openElsewhere(t, b, far, stateChanges(b), slack)
		heldElsewhere(t, b, "right after a 300-day publication")
		for i := range 2*openFor/time.Second - 1 {
			time.Sleep(time.Second)
			jitter := slack
			if i%2 == 0 {
				jitter = -slack
			}
			openElsewhere(t, b, far.Add(jitter), stateChanges(b), slack) // the same, read again
			heldElsewhere(t, b, "read again within 2 x OpenFor")
		}
		time.Sleep(time.Second)
		notHeld(t, b, "2 x OpenFor after it was first read")
		openElsewhere(t, b, far, stateChanges(b), slack)
		notHeld(t, b, "the same publication, read after its cap")

		openElsewhere(t, b, far.Add(slack+time.Millisecond), stateChanges(b), slack) // a new one
		heldElsewhere(t, b, "a publication ending later than the last by more than slack")
		time.Sleep(2*openFor - time.Nanosecond)
		heldElsewhere(t, b, "the new publication, just before its cap")
		time.Sleep(time.Nanosecond)
		notHeld(t, b, "the new publication, at its cap")

		openElsewhere(t, b, time.Now().Add(openFor/2), stateChanges(b), slack) // within the cap
		heldElsewhere(t, b, "a publication shorter than the cap")
		time.Sleep(openFor / 2)
		notHeld(t, b, "once the short publication has ended")

		// OpenElsewhere(zero) forgets the publication: the same end read
		// later is news again (a new publication that ends alike).
		openElsewhere(t, b, time.Time{}, stateChanges(b), slack)
		openElsewhere(t, b, far, stateChanges(b), slack)
		heldElsewhere(t, b, "a publication after none was read")
	})
}

// A publication read after this breaker changed state is older news than
// its own, now and when read again: the replica whose probe closed the
// breaker, reading its own publication back before the withdrawal landed,
// does not skip its healthy target on it.
func TestOpenElsewhereReadAgainAfterAChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1})
		until := time.Now().Add(2 * breaker.DefaultOpenFor)
		asOf := stateChanges(b)
		report(t, b, retry.Failure) // opens: a change while the read was on its way
		openElsewhere(t, b, until, asOf, 0)
		time.Sleep(breaker.DefaultOpenFor + time.Nanosecond)
		report(t, b, retry.NotFailure) // its probe closes it
		notHeld(t, b, "closed by its own probe")
		openElsewhere(t, b, until, stateChanges(b), 0)
		notHeld(t, b, "the same publication, read again after the probe")
	})
}

// A closure another replica published closes the gate for at most the
// limit from when it was first read; reading it again closes nothing, and
// one that ends later by more than slack is applied afresh.
func TestGateClosedElsewhereCappedByLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const limit, slack = time.Second, 50 * time.Millisecond
		var g breaker.Gate
		start := time.Now()
		end := start.Add(10 * time.Second)
		closeElsewhere(t, &g, end, limit, slack)
		if until, err := g.Refusal(); !errors.Is(err, breaker.ErrGateClosedElsewhere) || !until.Equal(start.Add(limit)) {
			t.Fatalf("Refusal = %v, %v; want closed elsewhere until the limit, %v", until, err, start.Add(limit))
		}
		time.Sleep(limit / 2)
		closeElsewhere(t, &g, end.Add(slack), limit, slack)
		if until, _ := g.Refusal(); !until.Equal(start.Add(limit)) {
			t.Fatalf("read again: closed until %v; want still %v", until, start.Add(limit))
		}
		time.Sleep(limit / 2)
		closeElsewhere(t, &g, end.Add(-slack), limit, slack)
		if _, err := g.Refusal(); err != nil {
			t.Fatalf("read again at the limit: %v; want open", err)
		}
		closeElsewhere(t, &g, end.Add(slack+time.Millisecond), limit, slack) // a new closure
		if until, err := g.Refusal(); !errors.Is(err, breaker.ErrGateClosedElsewhere) || !until.Equal(time.Now().Add(limit)) {
			t.Fatalf("a later closure: Refusal = %v, %v; want closed for the limit again", until, err)
		}
		// A limit of 0 is DefaultMaxGate.
		var d breaker.Gate
		closeElsewhere(t, &d, time.Now().Add(time.Hour), 0, 0)
		if until, _ := d.Refusal(); !until.Equal(time.Now().Add(breaker.DefaultMaxGate)) {
			t.Fatalf("limit 0: closed until %v; want DefaultMaxGate from now", until)
		}
	})
}

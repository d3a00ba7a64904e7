package breaker_test

// Tests of the protocol behind Track, Sync, Publish and Flush, on a store
// in memory shared by two replicas.

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/retry"
)

// replica is one replica's Shared on m, tracking one breaker (one failure
// opens it, for a fixed interval: FirstOpenFor is its OpenFor) and one gate
// under name "a".
type replica struct {
	s *breaker.Shared
	b *breaker.Breaker
	g *breaker.Gate
}

func newReplica(t *testing.T, m *memStore, openFor, maxGate time.Duration) *replica {
	t.Helper()
	s, err := breaker.NewShared(m, breaker.SharedConfig{ProbeEvery: time.Nanosecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	b, err := breaker.New("a", breaker.Config{ConsecutiveFailures: 1, FirstOpenFor: openFor, OpenFor: openFor})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{s: s, b: b, g: &breaker.Gate{}}
	s.Track("a", b, r.g, maxGate)
	breaker.NoJitterForTest(b) // these tests check the published figures
	return r
}

// fail reports one failed attempt to r's breaker, which opens it.
func (r *replica) fail(t *testing.T) {
	t.Helper()
	tk, err := r.b.Allow()
	if err != nil {
		t.Fatalf("Allow = %v", err)
	}
	tk.Report(retry.Failure)
	if r.b.State() != breaker.Open {
		t.Fatalf("State() = %v after a failure; want open", r.b.State())
	}
}

// One replica's opening, published, holds the other's breaker open from
// its Sync on, for at most twice the reader's OpenFor; the closing that
// follows the publisher's probe releases it; a published gate closes the
// reader's gate for at most its maxGate.
func TestSharedTrackSyncPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMemStore()
		a := newReplica(t, m, time.Minute, time.Hour)
		b := newReplica(t, m, 10*time.Second, time.Second)

		if err := a.s.Publish(ctx, a.b); err != nil || m.runs != 0 {
			t.Fatalf("Publish with no change: %v after %d round trips; want nil after none", err, m.runs)
		}
		if n := testing.AllocsPerRun(100, func() { _ = a.s.Publish(ctx, a.b) }); n != 0 {
			t.Fatalf("Publish with no change allocates %v times; want 0", n)
		}
		a.fail(t)
		if err := a.s.Publish(ctx, a.b); err != nil {
			t.Fatal(err)
		}
		if d := m.open["a"]; d != 2*time.Minute {
			t.Fatalf("published open for %v; want 2 x OpenFor (2m)", d)
		}
		if err := a.s.Publish(ctx, a.b); err != nil || m.runs != 1 {
			t.Fatalf("a second Publish: %v after %d round trips; want the change published once", err, m.runs)
		}
		if err := b.s.PublishGate(ctx, "a", time.Hour); err != nil {
			t.Fatal(err)
		}

		if err := b.s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		heldElsewhere(t, b.b, "after Sync")
		until, err := b.g.Refusal()
		if !errors.Is(err, breaker.ErrGateClosedElsewhere) || until.Sub(time.Now()) != time.Second {
			t.Fatalf("gate after Sync: %v until %v from now; want ErrGateClosedElsewhere for its maxGate (1s)", err, until.Sub(time.Now()))
		}
		time.Sleep(20 * time.Second)    // past the reader's 2 x OpenFor
		m.open["a"] -= 20 * time.Second // what is left on the store's clock
		if err := b.s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		notHeld(t, b.b, "2 x OpenFor after the first read, read again")

		// The publisher's probe closes its breaker: Publish withdraws the
		// opening, and the reader's next Sync forgets it.
		time.Sleep(time.Minute)
		tk, err := a.b.Allow()
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		tk.Report(retry.NotFailure)
		if err := a.s.Publish(ctx, a.b); err != nil {
			t.Fatal(err)
		}
		if _, ok := m.open["a"]; ok {
			t.Fatal("the closing did not withdraw the opening")
		}
	})
}

// A change the store did not take is kept: Flush tells it (and says so
// while the store still fails), and so does the next Sync whose read the
// store answers, where a closing told overrides the opening just read.
func TestSharedKeepsWhatTheStoreDidNotTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMemStore()
		a := newReplica(t, m, time.Minute, 0)
		down := errors.New("down")

		m.fail = down
		a.fail(t)
		if err := a.s.Publish(ctx, a.b); !errors.Is(err, breaker.ErrSharedUnavailable) {
			t.Fatalf("Publish with the store down = %v; want ErrSharedUnavailable", err)
		}
		time.Sleep(time.Millisecond) // past ProbeEvery
		err := a.s.Flush(ctx)
		if !errors.Is(err, breaker.ErrSharedUnavailable) || !strings.Contains(err.Error(), `target "a": its breaker's change to open was not published`) {
			t.Fatalf("Flush with the store down = %v; want ErrSharedUnavailable naming a's change to open", err)
		}
		if err := a.s.Sync(ctx); !errors.Is(err, breaker.ErrSharedUnavailable) {
			t.Fatalf("Sync with the store down = %v; want ErrSharedUnavailable", err)
		}
		m.fail = nil
		time.Sleep(time.Millisecond)
		if err := a.s.Flush(ctx); err != nil || m.open["a"] != 2*time.Minute {
			t.Fatalf("Flush with the store back: %v, published open for %v; want nil, 2m", err, m.open["a"])
		}
		if err := a.s.Flush(ctx); err != nil || m.runs != 3 {
			t.Fatalf("Flush again: %v after %d round trips; want nothing more told", err, m.runs)
		}

		// Its probe closes the breaker while the store is down; the
		// opening stays published. The next Sync tells the closing and
		// ignores the opening it read.
		time.Sleep(time.Minute)
		tk, err := a.b.Allow()
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		tk.Report(retry.NotFailure)
		m.fail = down
		if err := a.s.Publish(ctx, a.b); err == nil {
			t.Fatal("Publish with the store down reported nothing")
		}
		m.fail = nil
		time.Sleep(time.Millisecond)
		if err := a.s.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := m.open["a"]; ok {
			t.Fatal("Sync did not tell the closing the store did not take")
		}
		notHeld(t, a.b, "after Sync told the closing")
	})
}

// Publish leaves the change of a breaker Track was not given where it is.
func TestSharedPublishIgnoresAnUntrackedBreaker(t *testing.T) {
	m := newMemStore()
	s, err := breaker.NewShared(m, breaker.SharedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{s: s}
	r.b, err = breaker.New("x", breaker.Config{ConsecutiveFailures: 1})
	if err != nil {
		t.Fatal(err)
	}
	r.fail(t)
	if err := s.Publish(context.Background(), r.b); err != nil || m.runs != 0 {
		t.Fatalf("Publish of an untracked breaker: %v after %d round trips; want nil after none", err, m.runs)
	}
	take(t, r.b, breaker.Open, true, "after Publish of an untracked breaker")
}

// A replica publishes an opening for twice its current open interval
// (the interval, then the time its probe takes): 2 x FirstOpenFor at
// first, doubled with each failed probe up to 2 x OpenFor, and 2 x
// FirstOpenFor again after a close. A reader holds its closed breaker open
// for what was published while that is within 2 x its own OpenFor (the
// cap), and no longer.
func TestSharedPublishesTwiceTheCurrentInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMemStore()
		s, err := breaker.NewShared(m, breaker.SharedConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		a := &replica{s: s, g: &breaker.Gate{}}
		a.b, err = breaker.New("a", breaker.Config{ConsecutiveFailures: 1, OpenFor: time.Minute}) // 5s, doubling up to 60s
		if err != nil {
			t.Fatal(err)
		}
		s.Track("a", a.b, a.g, 0)
		breaker.NoJitterForTest(a.b)
		publish := func() {
			t.Helper()
			if err := a.s.Publish(ctx, a.b); err != nil {
				t.Fatal(err)
			}
		}
		a.fail(t)
		publish()
		for range 5 { // five failed probes
			time.Sleep(a.b.OpenInterval() + time.Nanosecond)
			a.fail(t)
			publish()
		}
		const s5 = 5 * time.Second
		want := []time.Duration{2 * s5, 4 * s5, 8 * s5, 16 * s5, 24 * s5, 24 * s5} // 2 x 5, 10, 20, 40, 60, 60s
		if !slices.Equal(m.opens, want) {
			t.Fatalf("published open for %v; want %v", m.opens, want)
		}
		time.Sleep(a.b.OpenInterval() + time.Nanosecond)
		tk, err := a.b.Allow()
		if err != nil {
			t.Fatalf("probe: %v", err)
		}
		tk.Report(retry.NotFailure)
		publish()
		if _, ok := m.open["a"]; ok {
			t.Fatal("the close did not withdraw the opening")
		}
		a.fail(t)
		publish()
		if got := m.opens[len(m.opens)-1]; got != 2*s5 {
			t.Fatalf("after a close, published open for %v; want 2 x FirstOpenFor (10s) again", got)
		}

		// Readers: one whose cap (2 x OpenFor, 2m) is over the 10s published
		// holds for the 10s; one whose cap is under it (OpenFor 3s) holds
		// for its cap, 6s.
		for _, rc := range []struct {
			openFor, held time.Duration
		}{{time.Minute, 2 * s5}, {3 * time.Second, 6 * time.Second}} {
			r := newReplica(t, m, rc.openFor, 0)
			start := time.Now()
			if err := r.s.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			time.Sleep(rc.held - time.Nanosecond)
			heldElsewhere(t, r.b, "just before the publication or the reader's cap ends")
			time.Sleep(time.Nanosecond)
			notHeld(t, r.b, "once the publication or the reader's cap has ended")
			if d := time.Since(start); d != rc.held {
				t.Fatalf("reader with OpenFor %v held for %v; want %v", rc.openFor, d, rc.held)
			}
		}
	})
}

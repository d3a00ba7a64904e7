package breaker_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"weak"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/retry"
)

// sender is an active probe's send: it records when it was called and
// the context's deadline, and answers what outcomes says, in turn (the
// last one for ever after).
type sender struct {
	mu       sync.Mutex
	start    time.Time
	at       []time.Duration // since start
	left     []time.Duration // until the context's deadline
	outcomes []func() retry.BreakerVerdict
}

func newSender(outcomes ...func() retry.BreakerVerdict) *sender {
	return &sender{start: time.Now(), outcomes: outcomes}
}

func verdict(v retry.BreakerVerdict) func() retry.BreakerVerdict {
	return func() retry.BreakerVerdict { return v }
}

func (s *sender) send(ctx context.Context) retry.BreakerVerdict {
	s.mu.Lock()
	n := len(s.at)
	s.at = append(s.at, time.Since(s.start))
	dl, _ := ctx.Deadline()
	s.left = append(s.left, time.Until(dl))
	f := s.outcomes[min(n, len(s.outcomes)-1)]
	s.mu.Unlock()
	return f()
}

// reset counts the times sent returns from now.
func (s *sender) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start = time.Now()
}

// timeLeft returns how long each probe's context had left when send was
// called.
func (s *sender) timeLeft() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.left...)
}

// sent returns when send was called, since start, to the millisecond
// (each opening starts when the probe before it ended, a tick after it
// was due).
func (s *sender) sent() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var at []time.Duration
	for _, d := range s.at {
		at = append(at, d.Round(time.Millisecond))
	}
	return at
}

func TestStartProbingProbesWhenEachOpeningEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tr := &transitions{}
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1, FirstOpenFor: 5 * time.Second, OpenFor: time.Minute,
			ActiveProbe: true, OnStateChange: tr.record})
		s := newSender(verdict(retry.Failure), verdict(retry.Failure), verdict(retry.NotFailure))
		stop := b.StartProbing(s.send, 3*time.Second)
		defer stop()
		time.Sleep(time.Hour)
		if got := s.sent(); len(got) != 0 {
			t.Fatalf("probes sent while the breaker was closed: %v", got)
		}
		s.reset()
		report(t, b, retry.Failure) // opens for 5s
		time.Sleep(time.Minute)
		// Probes at 5s (fails: open 10s), 15s (fails: open 20s), 35s (closes).
		want := []time.Duration{5 * time.Second, 15 * time.Second, 35 * time.Second}
		if got := s.sent(); len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("probes sent at %v; want %v", got, want)
		}
		for _, left := range s.timeLeft() {
			if left != 3*time.Second {
				t.Fatalf("a probe's context had %v left; want the timeout, 3s", left)
			}
		}
		wantState(t, b, breaker.Closed, "after the third probe succeeded")
		tr.want(t, "closed>open", "open>half-open", "half-open>open", "open>half-open", "half-open>open",
			"open>half-open", "half-open>closed")
	})
}

func TestStartProbingDefaultTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1, ActiveProbe: true})
		s := newSender(verdict(retry.NotFailure))
		defer b.StartProbing(s.send, 0)()
		report(t, b, retry.Failure)
		time.Sleep(time.Minute)
		if left := s.timeLeft(); len(left) != 1 || left[0] != 10*time.Second {
			t.Fatalf("probes' time left %v; want one probe, with 10s", left)
		}
	})
}

// A probe cut short (retry.Excluded) is not the target's verdict: the slot
// is freed and the probe goes again a second later. One that panics frees
// the slot too, and the next goes an open interval later.
func TestStartProbingExcludedAndPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1, ActiveProbe: true})
		s := newSender(verdict(retry.Excluded), func() retry.BreakerVerdict { panic("provider bug") }, verdict(retry.NotFailure))
		defer b.StartProbing(s.send, 0)()
		s.reset()
		report(t, b, retry.Failure) // opens for 5s
		time.Sleep(time.Minute)
		want := []time.Duration{5 * time.Second, 6 * time.Second, 11 * time.Second}
		if got := s.sent(); len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
			t.Fatalf("probes sent at %v; want %v", got, want)
		}
		wantState(t, b, breaker.Closed, "after the third probe succeeded")
	})
}

// stop waits for the probe in flight, and no probe is sent after it
// returns, though the probe's failure opened the breaker again.
func TestStartProbingStopWaitsForTheProbeInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1, ActiveProbe: true})
		release := make(chan struct{})
		s := newSender(func() retry.BreakerVerdict { <-release; return retry.Failure })
		stop := b.StartProbing(s.send, time.Hour)
		report(t, b, retry.Failure)
		time.Sleep(6 * time.Second) // the probe is in flight
		stopped := make(chan struct{})
		go func() { stop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stop returned while the probe was in flight")
		default:
		}
		close(release)
		<-stopped
		wantState(t, b, breaker.Open, "after the probe failed")
		time.Sleep(time.Hour)
		if got := s.sent(); len(got) != 1 {
			t.Fatalf("probes sent at %v; want the one in flight at stop, none after", got)
		}
	})
}

// A breaker already open when probing starts is probed when its opening
// ends; a disabled one never is.
func TestStartProbingOnAnOpenOrDisabledBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1, ActiveProbe: true})
		report(t, b, retry.Failure)
		time.Sleep(2 * time.Second)
		s := newSender(verdict(retry.NotFailure))
		s.reset()
		defer b.StartProbing(s.send, 0)()
		time.Sleep(time.Minute)
		if got := s.sent(); len(got) != 1 || got[0] != 3*time.Second {
			t.Fatalf("probes sent at %v; want one, when the opening ends (3s)", got)
		}
		wantState(t, b, breaker.Closed, "after the probe succeeded")

		d := mustNew(t, breaker.Config{Disabled: true, ActiveProbe: true})
		ds := newSender(verdict(retry.NotFailure))
		stop := d.StartProbing(ds.send, 0)
		report(t, d, retry.Trip)
		time.Sleep(time.Hour)
		stop()
		if got := ds.sent(); len(got) != 0 {
			t.Fatalf("a disabled breaker was probed at %v", got)
		}
	})
}

// dropStop starts probing b and drops its stop; it returns a weakly held
// witness of what send holds.
func dropStop(b *breaker.Breaker, s *sender) func() bool {
	type holder struct{ s *sender }
	h := &holder{s}
	_ = b.StartProbing(func(ctx context.Context) retry.BreakerVerdict { return h.s.send(ctx) }, 0)
	w := weak.Make(h)
	return func() bool { return w.Value() == nil }
}

// A stop dropped without being called ends the probing once it is
// collected, and the pending timer lets go of send then.
func TestDroppedStopEndsProbing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := mustNew(t, breaker.Config{ConsecutiveFailures: 1, ActiveProbe: true})
		s := newSender(verdict(retry.Failure))
		released := dropStop(b, s)
		report(t, b, retry.Failure)
		time.Sleep(6 * time.Second) // one probe, at 5s: it failed and scheduled the next
		if got := s.sent(); len(got) != 1 {
			t.Fatalf("probes sent at %v; want one before the stop was collected", got)
		}
		// The cleanup runs outside the bubble: wait for it without letting
		// the bubble's clock move.
		for tries := 0; !breaker.ProbingStoppedForTest(b); tries++ {
			if tries == 1000 {
				t.Fatal("the dropped stop did not end the probing")
			}
			runtime.GC()
			runtime.Gosched()
		}
		time.Sleep(time.Hour)
		if got := s.sent(); len(got) != 1 {
			t.Fatalf("probes sent at %v; want none after the stop was collected", got)
		}
		for tries := 0; !released(); tries++ {
			if tries == 1000 {
				t.Fatal("the stopped probing still holds its send")
			}
			runtime.GC()
			runtime.Gosched()
		}
	})
}

// A tracked breaker publishes its probe's outcome at once: the other
// replicas skip the target until the probe succeeds, and use it from
// their next read after.
func TestStartProbingPublishesThroughShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &clockStore{open: map[string]time.Time{}}
		ss, bs := sharedReplicas(t, store, 2)
		s := newSender(verdict(retry.NotFailure))
		defer bs[0].StartProbing(s.send, 0)()
		report(t, bs[0], retry.Failure)
		if err := ss[0].Publish(ctx, bs[0]); err != nil {
			t.Fatal(err)
		}
		if err := ss[1].Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := bs[1].Allow(); err == nil {
			t.Fatal("replica 1 was let through while replica 0's opening is published")
		}
		time.Sleep(time.Until(bs[0].ProbeAt()))
		synctest.Wait() // the probe succeeded, and was published
		if len(s.sent()) != 1 {
			t.Fatalf("probes sent at %v; want one", s.sent())
		}
		wantState(t, bs[0], breaker.Closed, "after its probe")
		if err := ss[1].Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if tk, err := bs[1].Allow(); err != nil {
			t.Fatalf("replica 1 after replica 0's probe succeeded: %v", err)
		} else {
			tk.Report(retry.NotFailure)
		}
	})
}

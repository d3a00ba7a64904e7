package race

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// entrant answers after delay, or ends when its context does; panics
// instead when told to.
type entrant struct {
	delay    time.Duration
	panics   bool
	answered bool
	canceled bool
}

func (e *entrant) Send(ctx context.Context) bool {
	select {
	case <-time.After(e.delay):
		if e.panics {
			panic("provider bug")
		}
		e.answered = true
	case <-ctx.Done():
		e.canceled = true
	}
	return e.answered
}

// TestWinnerIsTheFirstAcceptedAndTheLoserIsWaitedFor: ends are handed
// out in the order they came; the one still running is canceled and
// handed to lose only once it has ended.
func TestWinnerIsTheFirstAcceptedAndTheLoserIsWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r Race[*entrant]
		slow, fast := &entrant{delay: time.Hour}, &entrant{delay: time.Second}
		r.Go(t.Context(), slow, nil)
		if _, ended := r.Within(500 * time.Millisecond); ended {
			t.Fatal("an entrant ended within 500ms; neither answers that soon")
		}
		r.Go(t.Context(), fast, nil)
		var lost []*entrant
		won, loser, ok := r.Settle(func(e *entrant) bool { return e.answered },
			func(e *entrant, panicked bool) { lost = append(lost, e) })
		if !ok || won != fast || loser != slow {
			t.Fatalf("winner %+v, loser %+v, %v; want the fast entrant winning over the slow", won, loser, ok)
		}
		if len(lost) != 1 || lost[0] != slow || !slow.canceled {
			t.Fatalf("lost %v (slow canceled: %v); want the slow entrant, canceled", lost, slow.canceled)
		}
	})
}

// TestPanicGoesOnOnTheCallersGoroutine: a send that panics panics again
// where its end is handed out, and Abandon cancels and waits for its rival.
func TestPanicGoesOnOnTheCallersGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r Race[*entrant]
		rival := &entrant{delay: time.Hour}
		r.Go(t.Context(), &entrant{delay: time.Second, panics: true}, nil)
		r.Go(t.Context(), rival, nil)
		var released []*entrant
		got := func() (p any) {
			defer func() { p = recover() }()
			defer r.Abandon(func(e *entrant, panicked bool) { released = append(released, e) })
			r.Next()
			return nil
		}()
		if got != "provider bug" {
			t.Fatalf("recovered %v; want the send's panic", got)
		}
		if len(released) != 1 || released[0] != rival || !rival.canceled {
			t.Fatalf("released %v; want the rival, canceled", released)
		}
	})
}

// firer starts a rival when the armed timer fires.
type firer struct {
	r     *Race[*entrant]
	rival *entrant
}

func (f *firer) Fire() { f.r.Go(context.Background(), f.rival, nil) }

// TestArmedRaceStartsItsRivalOnlyOnceTheTimerFires: Disarm before the
// delay starts nothing; after it, the rival has started and is raced.
func TestArmedRaceStartsItsRivalOnlyOnceTheTimerFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r Race[*entrant]
		f := &firer{r: &r, rival: &entrant{delay: time.Second}}
		r.Arm(time.Minute, f)
		time.Sleep(time.Second)
		if r.Disarm() || r.Rival() != nil {
			t.Fatal("Disarm before the delay reported a rival")
		}
		r.Arm(time.Second, f)
		time.Sleep(1500 * time.Millisecond) // the armed attempt ends after the timer fired
		if !r.Disarm() {
			t.Fatal("Disarm at the delay reported no rival; the timer had fired")
		}
		if r.Rival() != f.rival {
			t.Fatalf("Rival %+v; want the rival the timer started", r.Rival())
		}
		slow := &entrant{}
		r.Enter(slow, func() {})
		won, loser, ok := r.Settle(func(e *entrant) bool { return e.answered }, func(*entrant, bool) {})
		if !ok || won != f.rival || loser != slow {
			t.Fatalf("winner %+v, loser %+v; want the rival winning over the armed attempt", won, loser)
		}
	})
}

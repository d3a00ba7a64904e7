// Package race runs the races of hedged requests and of patience: an
// attempt and, once it has gone unanswered for a while, a rival sent the
// same request, the first acceptable end winning and the other canceled.
// Package hedge configures hedging; package chain decides where a rival
// goes, and records, observes and settles every attempt of a race. This
// package keeps the bookkeeping they share: the sends run on goroutines of
// their own, every end is handed to the caller's goroutine one at a time
// in the order they came, a send that panicked panics again there, and
// nothing a race starts outlives it (the loser is canceled and waited for,
// a panic's rivals too).
package race

import (
	"context"
	"sync"
	"time"
)

// Entrant is one attempt of a race.
type Entrant interface {
	// Send makes the attempt under ctx, which the race cancels when the
	// attempt loses, and reports whether it answered.
	Send(ctx context.Context) (answered bool)
}

// Firer starts the rival of an armed race (Race.Arm).
type Firer interface {
	// Fire starts the rival (Race.Go), or does nothing when none may go.
	// It runs on the timer's goroutine while the caller's goroutine is in
	// the armed attempt's send.
	Fire()
}

// Race is one race of at most two entrants of type T. The zero value is
// ready; a Race armed (Arm) may be used again once its race has ended.
// Its methods are called on one goroutine, the caller's (Go, from a
// Firer's Fire, too).
type Race[T Entrant] struct {
	done    chan *lane[T]
	lanes   [2]lane[T]
	entered int // lanes entered
	pending int // lanes entered and not yet handed out

	// An armed race's (Arm): fire holds mu while it runs and sets fired
	// at its end, which Disarm waits for.
	mu    sync.Mutex
	ended sync.Cond
	fired bool
	timer *time.Timer
	firer Firer
	tick  func() // fire, made once
}

// lane is an entrant in the race.
type lane[T Entrant] struct {
	v      T
	cancel context.CancelFunc
	panic  any
	ended  bool // handed out
}

// enter adds v, ended by cancel, as the next lane.
func (r *Race[T]) enter(v T, cancel context.CancelFunc) *lane[T] {
	if r.done == nil {
		r.done = make(chan *lane[T], len(r.lanes))
	}
	l := &r.lanes[r.entered]
	*l = lane[T]{v: v, cancel: cancel}
	r.entered++
	r.pending++
	return l
}

// Go starts v's send on a goroutine of its own, under a context of ctx's
// that it returns the cancel of. rival, when set, is called once v
// answered (after the race has v's end): it ends an attempt running on
// the caller's goroutine, which only the end of its send frees.
func (r *Race[T]) Go(ctx context.Context, v T, rival context.CancelFunc) context.CancelFunc {
	ctx, cancel := context.WithCancel(ctx)
	l := r.enter(v, cancel)
	go r.run(ctx, l, rival)
	return cancel
}

// run sends l's entrant, then hands l to the race.
func (r *Race[T]) run(ctx context.Context, l *lane[T], rival context.CancelFunc) {
	answered := false
	defer func() {
		if p := recover(); p != nil {
			l.panic = p
		}
		r.done <- l
		if answered && rival != nil {
			rival() // after done: the race hands out this end first
		}
	}()
	answered = l.v.Send(ctx)
}

// Enter adds v, an attempt that ran on the caller's goroutine and has
// ended, to a race whose rival started (Disarm reported true); cancel
// ends what v holds when it loses.
func (r *Race[T]) Enter(v T, cancel context.CancelFunc) {
	r.done <- r.enter(v, cancel)
}

// Within waits up to d for the next entrant to end and hands it out;
// ended is false when d passed first.
func (r *Race[T]) Within(d time.Duration) (v T, ended bool) {
	timer := time.NewTimer(d)
	select {
	case l := <-r.done:
		timer.Stop()
		return r.out(l), true
	case <-timer.C:
		return v, false
	}
}

// Next waits for the next entrant to end and hands it out.
func (r *Race[T]) Next() T { return r.out(<-r.done) }

// out hands out lane l, which ended: its panic, if its send panicked,
// goes on here (Abandon then ends the rest).
func (r *Race[T]) out(l *lane[T]) T {
	l.ended = true
	r.pending--
	if l.panic != nil {
		l.cancel()
		panic(l.panic)
	}
	return l.v
}

// Settle runs the race to its end: it hands out the entrants as they end
// until accept takes one, then stops the other (Stop, lose). It
// returns the winner and the other entrant, the loser; won is false when
// every one ended and none was accepted.
func (r *Race[T]) Settle(accept func(T) bool, lose func(v T, panicked bool)) (winner, loser T, won bool) {
	for r.pending > 0 {
		l := <-r.done
		if v := r.out(l); accept(v) {
			winner, won = v, true
			for i := range r.entered {
				if o := &r.lanes[i]; o != l {
					loser = o.v
				}
			}
			break
		}
	}
	r.Stop(lose)
	return winner, loser, won
}

// Stop cancels the entrants still running, waits for each and hands it to
// lose, with whether its send panicked (its panic is dropped: the race
// has a winner).
func (r *Race[T]) Stop(lose func(v T, panicked bool)) {
	r.cancel()
	for r.pending > 0 {
		l := <-r.done
		l.ended = true
		r.pending--
		lose(l.v, l.panic != nil)
	}
	clear(r.lanes[:]) // a race armed again holds nothing of this one's
	r.entered = 0
}

// cancel cancels every lane not handed out.
func (r *Race[T]) cancel() {
	for i := range r.entered {
		if l := &r.lanes[i]; !l.ended && l.cancel != nil {
			l.cancel()
		}
	}
}

// Abandon, deferred by the caller, ends the race when a panic cut it
// short (a send's, which Next goes on with, or the caller's own): the
// rival an armed race may still start is waited for (Disarm), every
// entrant still running is canceled and waited for, and handed to
// release. On a race that ended it does nothing.
func (r *Race[T]) Abandon(release func(v T, panicked bool)) {
	if r.timer != nil {
		r.Disarm()
	}
	if r.pending > 0 {
		r.Stop(release)
	}
}

// Arm arms the rival of an attempt the caller makes on its own goroutine:
// after d, f.Fire runs on the timer's goroutine and may start it (Go).
// Until it fires, the race costs a timer and nothing runs.
func (r *Race[T]) Arm(d time.Duration, f Firer) {
	r.firer, r.fired = f, false
	r.ended.L = &r.mu
	if r.tick == nil {
		r.tick = r.fire
	}
	r.timer = time.AfterFunc(d, r.tick)
}

// fire runs f.Fire on the timer's goroutine, holding mu.
func (r *Race[T]) fire() {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer r.ended.Broadcast()
	defer func() { r.fired = true }()
	r.firer.Fire()
}

// Disarm, once the armed attempt has ended, stops the timer, or waits for
// Fire to end when it has started (a timer that fired as the attempt
// ended included), and reports whether the rival started: the race is
// then run (Enter, Winner, Stop); otherwise it is over.
func (r *Race[T]) Disarm() (raced bool) {
	if !r.timer.Stop() {
		r.mu.Lock()
		for !r.fired {
			r.ended.Wait()
		}
		r.mu.Unlock()
	}
	r.timer, r.firer = nil, nil
	return r.entered > 0
}

// Rival is the rival an armed race started (Go, from Fire), once Disarm
// has reported it did; the zero T otherwise.
func (r *Race[T]) Rival() T {
	var zero T
	if r.entered == 0 {
		return zero
	}
	return r.lanes[0].v
}

package chain

// Patience: an attempt that has not answered (a stream: not sent its
// first chunk) within its target's patience is raced by the same request
// sent to the next target of the chain that can take it; the slow
// attempt goes on, and the first acceptable answer serves. A slow target
// is never cut for being slow: with nowhere else to go, it is waited for
// up to its hard limit (limits.go) and the call's deadline.
//
// The patience race is the hedged race (hedge.go) with a wider field: its
// racer may be any later target, it spends no hedge budget, and the slow
// attempt, when it loses, is its breaker's failure. Armed on every attempt
// with a later target to race, it costs a timer until it fires
// (race.Race.Arm): the slow attempt runs on the walk's goroutine, and the
// timer's sends the racer. That timer holds the walk, so Call's walk comes
// from a pool. The wait is the target's patience (latency.Patience), armed
// when the hard limit and the call's deadline leave room for it.

import (
	"context"
	"time"

	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/internal/race"
	"github.com/backstop-llm/backstop/llm"
)

// patience returns how long attempt a may go unanswered before a later
// target races it; 0 when it will not be raced: its hard limit comes
// first, or no later target can take the call now.
func (w *walk) patience(a *attempt) time.Duration {
	t := a.t
	if !w.onward(t) {
		return 0
	}
	stream := w.send.commits(t)
	p := latency.Patience(t.Patience, t.learned(stream), stream)
	limit := t.hardLimit(stream)
	if stream {
		if fc := t.firstChunkLimit(); fc > 0 && (limit == 0 || fc < limit) {
			limit = fc
		}
	}
	if limit > 0 && p >= limit {
		return 0
	}
	if dl := w.deadline; !dl.IsZero() && dl.Sub(w.c.epoch.Add(a.start)) <= p {
		return 0
	}
	return p
}

// patient is the patience race of the walk's attempt in flight, armed:
// copies of what its racer is sent (the attempt and its request stay on
// try's stack), and the race (its Rival, once its timer fired).
type patient struct {
	a      attempt
	req    llm.Request
	caller *llm.Request
	delay  time.Duration
	race   race.Race[*racer]
}

// Fire sends the racer of the slow attempt (race.Firer): the same request
// to the next target that can take it now, which ends the slow attempt if
// it answers first. It runs on the timer's goroutine while the walk's
// waits in the slow attempt's send, and touches nothing the walk's reads
// meanwhile; the walk reads what it wrote once Disarm has waited for it.
func (w *walk) Fire() {
	p := &w.pat
	w.sendRacer(&p.a, &p.req, p.caller, p.delay, &p.race, len(w.c.targets), nil, p.a.cancel)
}

// patiently makes attempt a, sending req under ctx, raced after delay by
// the next target that can take it (see patient); s gets the outcome as
// attempt's would. A panic of the slow attempt's provider ends its racer
// too (Abandon).
func (w *walk) patiently(ctx context.Context, a *attempt, req, caller *llm.Request, s *sent, delay time.Duration) {
	if a.cancel == nil { // the racer must be able to end it
		ctx, a.cancel = context.WithCancel(ctx)
	}
	p := &w.pat
	p.a, p.req, p.caller, p.delay = *a, *req, caller, delay
	p.race.Arm(delay, w)
	defer p.race.Abandon(abandoned)
	resp, err := w.send.send(ctx, a, req, nil)
	if !p.race.Disarm() {
		w.unraced(a, resp, err, s)
		return
	}
	// Raced: a, the first of the race, has ended; its racer answered, is
	// answering, or failed.
	first := &racer{a: *a, req: *req, cancel: a.cancel, resp: resp, err: err, overdue: delay}
	if w.send.stream != nil {
		first.st = w.send.stream.st // its stream, if it opened one, is the race's now
		w.send.stream.st = streamState{}
	}
	p.race.Enter(first, a.cancel)
	w.settleRace(a, s, &p.race, first, p.race.Rival())
}

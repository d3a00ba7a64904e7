package chain

// Patience: an attempt that has not answered (a stream: not sent its
// first chunk) within its target's patience is raced by the same request
// sent to the next target of the chain that can take it; the slow
// attempt goes on, and the first acceptable answer serves. A slow target
// is never cut for being slow: with nowhere else to go, it is waited for
// up to its hard limit (limits.go) and the call's deadline.
//
// The patience race is the hedged race (hedge.go) with a wider field: its
// racer may be any later target of the chain, it spends no hedge budget,
// and the slow attempt, when it loses, is its breaker's failure. It is
// armed on every attempt that has a later target to race, so it must cost
// little until it fires: the slow attempt runs on the walk's goroutine as
// any attempt does, and a timer sends the racer from the timer's own
// goroutine only if the attempt has not answered by then (race.Race.Arm).
// That timer holds the walk, so Call's walk comes from a pool, not its
// stack. How long the attempt waits is the target's patience, set or
// learned from its answer times (latency.Patience); this file arms the race
// when the attempt's hard limit and the call's deadline leave room for it.

import (
	"context"
	"time"

	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/internal/race"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/policy"
)

// learned returns t's latest answer times (stream: times to the first
// chunk), which its patience learns from.
func (t *target) learned(stream bool) *latency.Window {
	if stream {
		return &t.firsts
	}
	return &t.answers
}

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
	if dl, ok := w.ctx.Deadline(); ok && dl.Sub(w.c.epoch.Add(a.start)) <= p {
		return 0
	}
	return p
}

// ahead returns the target at position pos, after t's: the walk's order
// within t's tier, or a later tier's (ranked when the walk entered it,
// the chain's order when it has not yet).
func (w *walk) ahead(t *target, pos int) *target {
	if pos < t.group.Hi {
		return w.target(pos)
	}
	u := w.c.targets[pos]
	if w.rank.Ranked(u.group.Index) {
		return w.target(pos)
	}
	return u
}

// onward reports whether a target after the walk's position can take the
// call now: it has not been sent it as a racer, and its policies would
// admit it (it carries the request, its gate and breaker are open).
func (w *walk) onward(t *target) bool {
	for pos := w.pos + 1; pos < len(w.c.targets); pos++ {
		u := w.ahead(t, pos)
		if w.triedAsHedge(u) || w.consult(u, policy.Peek, 1, nil, nil).Err != nil {
			continue
		}
		return true
	}
	return false
}

// patient is the patience race of the walk's attempt in flight, armed:
// copies of what its racer is sent (the attempt and its request stay on
// try's stack), the race, and, once its timer fired, the racer.
type patient struct {
	a      attempt
	req    llm.Request
	caller *llm.Request
	delay  time.Duration
	race   race.Race[*racer]
	racer  *racer
}

// Fire sends the racer of the slow attempt (race.Firer): the same request
// to the next target that can take it now, which ends the slow attempt if
// it answers first. It runs on the timer's goroutine while the walk's
// waits in the slow attempt's send, and touches nothing the walk's reads
// meanwhile; the walk reads what it wrote once Disarm has waited for it.
func (w *walk) Fire() {
	p := &w.pat
	p.racer = w.sendRacer(&p.a, &p.req, p.caller, p.delay, &p.race, len(w.c.targets), nil, p.a.cancel)
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
	p.a, p.req, p.caller, p.delay, p.racer = *a, *req, caller, delay, nil
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
	w.settleRace(a, s, &p.race, first, p.racer)
	p.racer = nil
}

// unraced ends attempt a, which was not raced, as attempt does: a stream
// that committed is left running, anything else concluded.
func (w *walk) unraced(a *attempt, resp *llm.Response, err error, s *sent) {
	if err == nil && resp != nil && w.send.commits(a.t) {
		s.resp, s.committed = resp, true
		w.firstChunkAt(a)
		return
	}
	if a.cancel != nil {
		a.cancel()
	}
	w.conclude(a, resp, err, s)
}

// overdueReason is the record's reason for an attempt that lost its
// patience race.
func overdueReason(r, winner *racer) string {
	return "no answer within its patience of " + r.overdue.String() + "; " + winner.a.t.Name + " answered first"
}

package chain

// Hedged requests: an attempt raced, after the hedge delay, by the same
// request sent to the next target of its tier (walk.go's hedgeTarget).
// Package race runs the sends; the walk's goroutine observes, settles and
// records every attempt of the race.

import (
	"context"
	"errors"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/plan"
	"github.com/backstop-llm/backstop/internal/race"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/retry"
)

// ErrLostRace is the Err of an attempt canceled because another attempt of
// its hedged race answered first (DecisionLost).
var ErrLostRace = errors.New("lost the race: another attempt of the hedged race answered first")

// racer is one attempt of a race (package race runs it): its own copies
// of the attempt and the request (the walk's stay on the walk's stack),
// its own stream, and its outcome; everything but its send happens on
// the walk's goroutine.
type racer struct {
	send   sender
	a      attempt
	req    llm.Request
	st     streamState // a stream's, once it commits
	cancel context.CancelFunc
	resp   *llm.Response
	err    error
	s      sent
	// overdue is the patience the racer outlived, when it is the slow
	// attempt of a patience race (patience.go): losing it is a failure
	// of its target's, not nothing. 0 otherwise.
	overdue time.Duration
}

// Send makes r's attempt (race.Entrant).
func (r *racer) Send(ctx context.Context) bool {
	r.resp, r.err = r.send.send(ctx, &r.a, &r.req, &r.st)
	return r.err == nil && r.resp != nil
}

// launch starts a racer for attempt a (copied) sending req (copied) in rc.
func (w *walk) launch(rc *race.Race[*racer], ctx context.Context, a *attempt, req *llm.Request, rival context.CancelFunc) *racer {
	r := &racer{send: w.send, a: *a, req: *req}
	r.a.req = &r.req
	r.cancel = rc.Go(ctx, r, rival)
	return r
}

// race makes attempt a, sending req under ctx, hedged after delay: when
// it has not answered by then, the same request goes to the next target
// of the tier that admits it, and the first acceptable answer is the
// attempt's outcome (s.by naming the hedge when the hedge's). caller is
// the caller's request, which the hedge's target prepares its own from.
func (w *walk) race(ctx context.Context, a *attempt, req, caller *llm.Request, s *sent, delay time.Duration) {
	rc := new(race.Race[*racer])
	defer rc.Abandon(abandoned)
	first := w.launch(rc, ctx, a, req, nil)
	if r, ok := rc.Within(delay); ok {
		w.alone(r, s)
		return
	}
	h := w.sendRacer(a, req, caller, delay, rc, a.t.group.Hi, a.t.hedge.Admit, nil)
	if h == nil {
		w.alone(rc.Next(), s)
		return
	}
	w.settleRace(a, s, rc, first, h)
}

// abandoned releases racer r, still running when a panic ended its race
// (race.Race.Abandon), as abandon does an attempt that was not raced. No
// observer is told of its end: the walk is unwinding, and the call's own
// end is not reported either.
func abandoned(r *racer, panicked bool) { r.release(r.a.start, retry.Excluded, panicked) }

// release gives back what racer r, ended by the race rather than by its
// target (at end, on the chain's clock), holds: its stream, its Timeout,
// what its policies hold (settled as lost, with verdict v: retry.Excluded,
// told of neither a failure nor a success, unless it outlived its
// patience; what it cost, r.s.cost, set by lose) and its count in
// flight. A racer whose send panicked gave back the last two already
// (abandon).
func (r *racer) release(end time.Duration, v retry.BreakerVerdict, panicked bool) {
	r.st.release() // the stream it committed, if it did
	if r.a.cancel != nil {
		r.a.cancel()
	}
	if panicked {
		return
	}
	var pa policy.Attempt
	r.a.t.policies.Settle(context.Background(), r.a.settling(&pa), &r.a.holds, &policy.Outcome{Sent: true, Lost: true, Verdict: v, At: time.Now(), Cost: r.s.cost})
	if t := r.a.t; t.load != nil {
		t.load.End(end, 0)
	}
}

// alone ends racer r, an attempt that was not raced after all, as an
// unhedged attempt ends.
func (w *walk) alone(r *racer, s *sent) {
	if !w.won(r, s) {
		w.concludeRacer(r, s)
	}
}

// won installs racer r's committed stream as the call's and reports true;
// false when r did not commit one.
func (w *walk) won(r *racer, s *sent) bool {
	if !w.committed(r) {
		return false
	}
	st := &w.send.stream.st
	*st = r.st
	if prev := st.a.cancel; prev != nil {
		st.a.cancel = func() { prev(); r.cancel() }
	} else {
		st.a.cancel = r.cancel
	}
	s.resp, s.committed = r.resp, true
	w.firstChunkAt(&r.a)
	return true
}

// concludeRacer ends racer r, which ended on its own, as conclude ends an
// attempt: classified, validated, observed, settled; s gets its outcome.
func (w *walk) concludeRacer(r *racer, s *sent) {
	r.cancel()
	if r.a.cancel != nil {
		r.a.cancel()
	}
	w.conclude(&r.a, r.resp, r.err, s)
}

// sendRacer sends the racer of attempt a (sending req): to the next
// target before position hi that admits one (a hedge goes to a's tier,
// hi its end; a patience race to any later target), and returns its
// racer; nil when none is sent. bud, the hedge budget (nil for a
// patience race, which spends none), is asked first: while it is
// exhausted (an outage makes every attempt slow) no target is asked for
// a breaker ticket or a throttle slot only to give them back. A hedge the
// budget refuses is recorded as the skip it is, not as a hedge:
// Attempt.Hedge marks the racers sent, which is what a count of hedges
// counts. rival, when set, is called once the racer answers.
func (w *walk) sendRacer(a *attempt, req, caller *llm.Request, delay time.Duration, rc *race.Race[*racer], hi int, bud policy.Policy, rival context.CancelFunc) *racer {
	var spent policy.Hold
	pa := policy.Attempt{Phase: policy.Send, Target: a.t.Name, N: a.n, Hedge: true}
	if bud != nil {
		adm := bud.Admit(w.ctx, &pa)
		if adm.Err != nil {
			if pos, h, _, _ := w.hedgeTarget(a.t, hi, req, caller, false); h != nil {
				rec := skipped(h, 1, 0, adm.Err, adm.Reason)
				rec.Choice = w.rank.Choice(pos)
				w.record(rec)
				w.obs.Skip(&h.ob, 1, adm.Cause, adm.Reason, adm.Err)
			}
			return nil
		}
		spent = adm.Hold
	}
	pos, h, hreq, holds := w.hedgeTarget(a.t, hi, req, caller, true)
	if h == nil {
		if bud != nil {
			bud.Settle(w.ctx, &pa, spent, &policy.Outcome{}) // not sent: given back
		}
		return nil
	}
	w.hedged.Add(h.ob.Index)
	b := attempt{t: h, n: 1, holds: holds, tools: a.tools, choice: w.rank.Choice(pos), hedge: true, req: &hreq}
	ctx := w.ctx
	if w.obs != nil {
		ctx = w.observeStart(ctx, &b, observe.AttemptStart{N: 1, Request: hreq, Choice: b.choice,
			Hedge: true, HedgeOf: a.t.Name, HedgeDelay: delay})
	}
	if limit := h.hardLimit(w.send.commits(h)); limit > 0 {
		ctx, b.cancel = context.WithTimeout(ctx, limit)
	}
	b.start = w.c.clock()
	return w.launch(rc, ctx, &b, &hreq, rival)
}

// settleRace waits for the race rc of attempt a (first) and its racer h:
// the first acceptable answer wins, the other is canceled and waited for.
// Every attempt but a's own is recorded here; a's outcome goes to s (s.by
// naming h when h answered), and a's record, when it lost, here too.
func (w *walk) settleRace(a *attempt, s *sent, rc *race.Race[*racer], first, h *racer) {
	winner, loser, won := rc.Settle(func(r *racer) bool {
		if w.committed(r) {
			return true
		}
		w.concludeRacer(r, &r.s)
		return r.s.err == nil
	}, w.lose)
	if !won { // both failed: a's failure decides; the hedge leaves its target
		*s = first.s
		w.causes = append(w.causes, &TargetError{Target: h.a.t.Name, Tier: h.a.t.tier, Err: h.s.err})
		w.leave(&h.a, &h.s, plan.Step{Decision: plan.Next, Reason: "the hedge failed too", CloseGate: h.s.retryAfter > h.a.t.policy.MaxRetryAfter})
		return
	}
	reason := race.Reason(winner.a.t.Name, loser.s.err != ErrLostRace, loser.overdue)
	w.record(loser.a.record(&loser.s, DecisionLost, reason))
	w.take(winner, s)
	if winner == h {
		s.by = &h.a
	}
}

// committed reports whether racer r committed a stream: its first chunk
// came, which wins a streamed race.
func (w *walk) committed(r *racer) bool {
	return r.err == nil && r.resp != nil && w.send.commits(r.a.t)
}

// take makes the winner r's outcome the attempt's: its committed stream,
// or the answer conclude checked.
func (w *walk) take(r *racer, s *sent) {
	if w.won(r, s) {
		return
	}
	*s = r.s
}

// lose ends racer r, canceled because another answered: its stream
// closed, its breaker told of nothing (the race, not the target, ended
// it) unless it outlived its patience (a failure of its target's), its
// observers told it lost, with the request-id it had.
func (w *walk) lose(r *racer, panicked bool) {
	a, t := &r.a, r.a.t
	r.s = sent{err: ErrLostRace, kind: llm.KindCanceled, elapsed: w.c.clock() - a.start, requestID: race.RequestID(r.resp, r.err, r.a.opened),
		cost: r.lostCost()}
	verdict := retry.Excluded // the race, not the target, ended it
	if r.overdue > 0 {
		verdict = retry.Failure // it did not answer within its patience
	}
	r.release(a.start+r.s.elapsed, verdict, panicked)
	w.obs.EndAttempt(a.obs, &t.ob, observe.AttemptEnd{N: a.n, RequestID: r.s.requestID, Kind: llm.KindCanceled, Err: ErrLostRace,
		Duration: r.s.elapsed, Lost: true, Cost: r.s.cost})
}

// lostCost is what racer r, which lost its race, cost: its answer's usage
// when one arrived, what its stream had sent when it committed one, else
// the prompt the provider read (estimated).
func (r *racer) lostCost() cost.Cost {
	switch p := r.a.t.Price; {
	case r.st.a != nil: // a stream it committed, read before it is released
		return cost.Cut(r.st.rs.Response(), p)
	case r.resp != nil:
		return cost.Of(r.resp.Usage, p)
	default:
		return cost.Unanswered(&r.req, p)
	}
}

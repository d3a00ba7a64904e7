package chain

import (
	"context"
	"encoding/json"
	"time"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/answer"
	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/internal/pause"
	"github.com/backstop-llm/backstop/internal/plan"
	"github.com/backstop-llm/backstop/internal/seam"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/spread"
)

// attempt is one attempt in flight on a target.
type attempt struct {
	t      *target
	n      int           // from 1
	holds  seam.Holds    // what its target's policies hold for it, given back when it is settled
	wait   time.Duration // waited before it (backoff and pacing)
	start  time.Duration // on the chain's clock
	obs    observe.Attempt
	cancel context.CancelFunc // the per-attempt Timeout's; nil when none
	tools  []llm.Tool         // the request's, to check the answer's calls
	// req is the request as sent, while the attempt is in flight (the
	// walk's or the racer's): a timeout with no answer is priced by it.
	req    *llm.Request
	choice *spread.Choice // why the walk chose t; nil in an ordered tier
	hedge  bool           // sent as a hedge of another attempt
	// opened is the request id its stream's response headers carried,
	// when the stream opened but ended before its first chunk (a failure
	// of the chain's own or a lost race carries none of its own).
	opened string
}

// sent is how an attempt ended, as the walk classified it.
type sent struct {
	resp    *llm.Response // the answer; nil on failure
	js      json.RawMessage
	invalid *llm.Response // an answer that failed its schema
	err     error
	kind    llm.Kind
	status  int
	// requestID, retryAfter and shouldRetry are the provider's, from its
	// answer or its *llm.Error.
	requestID   string
	retryAfter  time.Duration
	shouldRetry *bool
	elapsed     time.Duration
	cost        cost.Cost // what the attempt cost (policy.Outcome.Cost)
	// lostOn is the target whose warm prompt cache the attempt left
	// (cost.CacheLost); nil when none.
	lostOn    *target
	committed bool // a stream still arriving: its sender ends it
	// by is the hedge that answered in the attempt's stead; nil when the
	// attempt's own outcome is this.
	by *attempt
}

// record is the attempt's record, with the decision taken after it.
func (a *attempt) record(s *sent, d Decision, reason string) Attempt {
	if s.lostOn != nil {
		if reason != "" {
			reason += "; "
		}
		reason += lostReason(s.lostOn)
	}
	return Attempt{Target: a.t.Name, Tier: a.t.tier, Model: a.t.Model, N: a.n, Wait: a.wait, Duration: s.elapsed,
		Status: s.status, RequestID: s.requestID, Kind: s.kind, Err: s.err, Decision: d, Reason: reason,
		Choice: a.choice, Hedge: a.hedge, Cost: s.cost}
}

// served writes the record of attempt a, which answered, into rec (zero).
func (a *attempt) served(rec *Attempt, s *sent) {
	rec.Target, rec.Tier, rec.Model, rec.N, rec.Decision = a.t.Name, a.t.tier, a.t.Model, a.n, DecisionServed
	rec.Wait, rec.Duration, rec.Status, rec.RequestID = a.wait, s.elapsed, s.status, s.requestID
	rec.Hedge, rec.Cost = a.hedge, s.cost
	if a.choice != nil { // rec is zero: a pointer store costs a write barrier while the collector runs
		rec.Choice = a.choice
	}
	if s.lostOn != nil {
		rec.Reason = lostReason(s.lostOn)
	}
}

// skipped is the record of attempt n on t, not sent (after waiting wait),
// for err.
func skipped(t *target, n int, wait time.Duration, err error, reason string) Attempt {
	return Attempt{Target: t.Name, Tier: t.tier, Model: t.Model, N: n, Wait: wait, Err: err, Decision: DecisionSkip, Reason: reason}
}

// tried is how a target's attempts ended.
type tried struct {
	resp      *llm.Response
	js        json.RawMessage
	committed bool // a stream still arriving (its sender has the attempt)
	err       error
	kind      llm.Kind
	stop      bool    // the call stops here (the next-target column said so)
	skipped   bool    // t's policies refused its first attempt: passed over, recorded
	by        *target // the hedge's target, when a hedge answered
}

// try makes the attempts on t: each admitted by t's policies (Send), sent
// (attempt), planned and recorded; a retry the plan decides is admitted
// by the policies (Plan) before its backoff, and again (Send) after it.
// A first attempt the policies refuse passes t over (skipped).
func (w *walk) try(t *target, caller *llm.Request) tried {
	// The request sent lives on the walk (w.req), which lives on the heap
	// already: the policies are shown it (policy.Attempt.Request), and a
	// request on try's stack would move to the heap for it. Racers and
	// streams keep copies.
	w.req = *caller
	req := &w.req
	t.prepare(req)
	var wait, prev time.Duration
	var s sent                     // this attempt's outcome
	var holds seam.Holds           // what t's policies hold for the next attempt
	var owed policy.Admission      // a soft refusal of the next retry, held until its backoff has passed
	choice := w.rank.Choice(w.pos) // the same for every attempt on t in this call
	n := 1
	if r := w.again; r != nil {
		w.again = nil
		if r.t == t {
			// t's streamed answer failed its check: on with its re-ask,
			// as below after an attempt's.
			n, s, holds, owed = r.n, r.last, r.holds, r.owed
			req.Messages = r.msgs
		}
	}
	for ; ; n++ {
		if owed.Err != nil {
			if w.consult(t, policy.Peek, n, nil, nil).Err == nil {
				// No policy would refuse the retry now (none may make
				// the call wait for it): the soft refusal stands.
				return w.notSent(t, n, wait, &s, owed)
			}
			owed = policy.Admission{} // one would: Send decides
		}
		adm := w.consult(t, policy.Send, n, req, &holds)
		wait += adm.Waited
		w.waited = w.waited || adm.Awaited
		if adm.Waited > 0 {
			w.nowOK = false // the attempt reads its own start
		}
		if adm.Err != nil {
			if n == 1 {
				return w.passedOver(t, adm)
			}
			return w.notSent(t, n, wait, &s, adm)
		}
		// On the stack: a stream keeps a copy.
		a := &attempt{t: t, n: n, holds: holds, wait: wait, tools: req.Tools, choice: choice, req: req}
		holds = seam.Holds{}
		if n > 1 {
			s = sent{} // the last failure is no longer needed
		}
		w.attempt(a, req, caller, &s)
		switch {
		case s.committed || s.err == nil:
			// a answered, or the hedge that raced it (s.by) did; a
			// committed stream is recorded by its sender.
			won, by := a, (*target)(nil)
			if s.by != nil {
				won, by = s.by, s.by.t
			}
			if !s.committed {
				won.served(w.grow(), &s)
			}
			return tried{resp: s.resp, js: s.js, committed: s.committed, by: by}
		case s.kind == llm.KindCanceled:
			w.record(a.record(&s, DecisionStop, "the caller canceled"))
			return tried{err: s.err, kind: s.kind}
		}
		st := w.plan(a, &s, prev)
		if st.Decision != plan.Retry {
			return w.leave(a, &s, st)
		}
		if owed = w.consult(t, policy.Plan, n+1, nil, &holds); owed.Err != nil && !owed.Soft {
			// Refused before the backoff: the retry is not waited for.
			// The refusal ends this call's retry, nothing more: a
			// Retry-After was granted as a wait calls will take, so the
			// gate stays open.
			w.record(a.record(&s, DecisionNext, owed.Reason))
			return w.notSent(t, n+1, 0, &s, owed)
		}
		w.record(a.record(&s, DecisionRetry, st.Reason))
		w.obs.Retry(&t.ob, n, s.kind, st.Wait, s.retryAfter, st.Reason)
		if s.invalid != nil {
			// Re-ask at once, with the problems added to the conversation.
			req.Messages = answer.Reask(req.Messages, req.Tools, s.invalid, s.err)
		} else {
			prev = st.Wait
		}
		before := w.c.clock()
		if err := pause.For(w.ctx, st.Wait); err != nil {
			t.policies.Release(w.ctx, w.policyAttempt(t, policy.Plan, n+1, false), &holds) // a retry withdrawn is given back
			return w.waitCut(a, &s, w.c.clock()-before)
		}
		wait = st.Wait
	}
}

// plan asks the planner (internal/plan) what follows the failed attempt
// a, drawing the policy's backoff (prev is the wait before a, for
// decorrelated jitter).
func (w *walk) plan(a *attempt, s *sent, prev time.Duration) plan.Step {
	t := a.t
	f := plan.Failure{Kind: s.kind, N: a.n, RetryAfter: s.retryAfter, ShouldRetry: s.shouldRetry, Invalid: s.invalid != nil}
	l := plan.Limits{Table: t.table, Policy: t.policy, ContentFallback: w.c.contentFallback}
	if t.group.Spreads() && w.later(t) {
		l.Elsewhere = t.group.Name
	}
	if t.table.Rule(s.kind).ElsewhereFirst {
		l.Onward = w.onward(t)
	}
	if !f.Invalid && f.N < plan.Attempts(t.table, s.kind, t.policy, s.shouldRetry) {
		l.Backoff = plan.Wait(t.policy, a.n-1, prev, s.retryAfter)
	}
	if !w.deadline.IsZero() {
		l.Left, l.HasDeadline = time.Until(w.deadline), true
	}
	return plan.Decide(f, l)
}

// leave leaves t after attempt a as st says: a Retry-After not waited
// out closes its gate, a context-length failure raises the window the
// next targets need.
func (w *walk) leave(a *attempt, s *sent, st plan.Step) tried {
	t := a.t
	if st.CloseGate {
		w.c.closeGate(w.ctx, w.obs, t, s.retryAfter)
	}
	if t.table.Rule(s.kind).Fallback == retry.LargerContext {
		w.minWindow = max(w.minWindow, t.ContextWindow)
	}
	d := decisionOf(st.Decision)
	w.record(a.record(s, d, st.Reason))
	return tried{err: s.err, kind: s.kind, stop: d == DecisionStop}
}

// decisionOf is the Decision the chain records for the planner's d.
func decisionOf(d plan.Decision) Decision {
	switch d {
	case plan.Retry:
		return DecisionRetry
	case plan.Next:
		return DecisionNext
	case plan.Stop:
		return DecisionStop
	}
	return DecisionNone
}

// attempt makes attempt a, sending req (prepared for a's target from
// caller, the caller's): observed, under the target's Timeout, sent by the
// walk's sender (hedged when its target hedges), its answer validated, its
// end reported to the throttle, the breaker, the budget and the
// observers. A stream that commits is left running, for its sender to
// end.
func (w *walk) attempt(a *attempt, req, caller *llm.Request, s *sent) {
	c, t := w.c, a.t
	ctx := w.ctx
	if w.obs != nil { // checked here: the event is not even built for nobody
		ctx = w.observeStart(ctx, a, observe.AttemptStart{N: a.n, Request: *req, Choice: a.choice})
	}
	if w.nowOK {
		a.start = w.now // admitted just now, nothing waited since
	} else {
		a.start = c.clock()
	}
	w.nowOK = false
	if limit := t.hardLimit(w.send.commits(t)); limit > 0 && w.bounds(ctx, t, limit, a.start) {
		ctx, a.cancel = context.WithTimeout(ctx, limit)
	}
	if w.begin < 0 {
		w.begin = a.start
	}
	if t.hedge != nil {
		if delay, ok := w.hedgeDelay(a); ok {
			w.race(ctx, a, req, caller, s, delay)
			return
		}
	}
	if p := w.patience(a); p > 0 {
		w.patiently(ctx, a, req, caller, s, p)
		return
	}
	resp, err := w.send.send(ctx, a, req, nil)
	w.unraced(a, resp, err, s)
}

// hedgeDelay returns how long attempt a may go unanswered before it is
// hedged; ok is false when it will not be: an adaptive delay with too few
// answers to go by, or no later target in the tier to hedge to. A first
// attempt counts as a call in the hedge budget.
func (w *walk) hedgeDelay(a *attempt) (time.Duration, bool) {
	t := a.t
	if a.n == 1 {
		t.hedge.Budget.Record(w.ctx, budget.Outcome{At: w.c.epoch.Add(a.start)}) // At spares the budget a clock read
	}
	c := &t.hedge.Config
	d, ok := latency.Delay(c.Delay, c.Adaptive, c.Quantile, t.group.Window)
	if !ok {
		return 0, false
	}
	return d, w.later(t)
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

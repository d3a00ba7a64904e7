package chain

// How an attempt ends: classified, checked, observed, and settled with its
// target's policies.

import (
	"context"
	"errors"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/retry"
)

// conclude classifies the end of attempt a and reports it.
func (w *walk) conclude(a *attempt, resp *llm.Response, err error, s *sent) {
	c, t := w.c, a.t
	s.elapsed = c.clock() - a.start
	if err == nil && (resp == nil || t.schema != nil || len(resp.ToolCalls) > 0) {
		err = w.inspect(a, resp, s)
	}
	now := c.epoch.Add(a.start + s.elapsed) // carries the monotonic reading
	if t.load != nil || t.group.Window != nil {
		t.group.Sample(t.load, a.start, s.elapsed, err, w.send.commits(t))
	}
	if err == nil && len(c.targets) > 1 { // a chain of one races nothing: no patience to learn
		t.answers.Add(s.elapsed)
	}
	if err != nil {
		w.failed(a, resp, err, s, now)
		return
	}
	s.resp, s.status, s.requestID = resp, 200, resp.RequestID
	s.cost, s.lostOn = w.bill(t, &resp.Usage, cost.Of(resp.Usage, t.Price), a.start+s.elapsed)
	if w.obs != nil {
		w.obs.EndAttempt(a.obs, &t.ob, observe.AttemptEnd{N: a.n, Response: resp, Status: 200, RequestID: resp.RequestID, Duration: s.elapsed, Cost: s.cost})
	}
	w.po = policy.Outcome{Sent: true, Verdict: retry.NotFailure, Success: true, Response: resp,
		RateLimit: resp.RateLimit, At: now, Elapsed: s.elapsed, Cost: s.cost}
	w.settle(a)
}

// inspect checks the answer resp of attempt a that carries a schema's
// JSON or tool calls (or is missing): the error makes the attempt a
// failure, and an answer that failed its schema is kept in s.invalid, to
// re-ask with.
func (w *walk) inspect(a *attempt, resp *llm.Response, s *sent) (err error) {
	if resp == nil {
		return &llm.Error{Provider: a.t.Provider.Name(), Kind: llm.KindUnknown, Message: "provider returned neither an answer nor an error"}
	}
	if s.js, err = w.c.checkAnswer(a.t, a.tools, resp); err != nil && llm.KindOf(err) == llm.KindInvalidOutput {
		s.invalid = resp
	}
	return err
}

// failed reports attempt a, which failed with err at now (resp is the
// answer that failed, if one arrived): classified into s, observed with
// its request-id, and settled with the verdict its kind's rule gives.
func (w *walk) failed(a *attempt, resp *llm.Response, err error, s *sent, now time.Time) {
	c, t := w.c, a.t
	w.classify(s, err)
	if s.kind == llm.KindUnknown && w.ctx.Err() == nil {
		// A provider that reports its context's end as it found it
		// (context.DeadlineExceeded, or KindCanceled) when the attempt's
		// own limit ended it: that is this attempt's timeout.
		if limit := t.hardLimit(w.send.commits(t)); limit > 0 && s.elapsed >= limit {
			s.kind = llm.KindTimeout
		}
	}
	if s.requestID == "" && resp != nil {
		s.requestID = resp.RequestID
	}
	if s.requestID == "" {
		s.requestID = a.opened
	}
	switch {
	case resp != nil: // an answer that failed its checks was billed
		s.cost, s.lostOn = w.bill(t, &resp.Usage, cost.Of(resp.Usage, t.Price), a.start+s.elapsed)
	case s.kind == llm.KindTimeout && a.req != nil:
		// Its own Timeout cut it: the provider had read the prompt.
		s.cost = cost.Unanswered(a.req, t.Price)
	}
	w.obs.EndAttempt(a.obs, &t.ob, observe.AttemptEnd{N: a.n, Response: s.invalid, Status: s.status, RequestID: s.requestID,
		Kind: s.kind, Err: err, Duration: s.elapsed, Cost: s.cost})
	if s.invalid != nil {
		w.obs.ValidationFailed(&t.ob, err)
	}
	verdict := t.table.Rule(s.kind).Breaker
	if verdict == retry.Failure && w.ctx.Err() != nil && !c.fair(w.ctx, a.start, w.begin) {
		verdict = retry.Excluded // our deadline cut it short before it had a fair chance
	}
	w.po = policy.Outcome{Sent: true, Verdict: verdict, Kind: s.kind, Err: err, Response: resp,
		RateLimit: rateLimitOf(resp, err), At: now, Elapsed: s.elapsed, Cost: s.cost}
	w.settle(a)
}

// settle tells attempt a's target's policies how a ended (w.po, which
// the caller fills), giving each what it held for a.
func (w *walk) settle(a *attempt) {
	a.t.policies.Settle(w.ctx, a.settling(&w.pa), &a.holds, &w.po)
}

// settling fills pa (field by field: it may be the walk's) with a as its
// target's policies are told of it when it is settled, and returns it.
func (a *attempt) settling(pa *policy.Attempt) *policy.Attempt {
	pa.Phase, pa.Target, pa.N, pa.Hedge, pa.Last, pa.Request, pa.Caller = policy.Send, a.t.Name, a.n, a.hedge, false, nil, nil
	return pa
}

// classify fills s from the failure err: what the provider said, and the
// kind, trusting the caller's context over the provider (a provider
// reporting a cancellation the caller did not ask for is a failed attempt,
// not a reason to stop the call).
func (w *walk) classify(s *sent, err error) {
	var le *llm.Error
	if errors.As(err, &le) {
		s.status, s.requestID, s.retryAfter, s.shouldRetry = le.Status, le.RequestID, le.RetryAfter, le.ShouldRetry
	}
	s.kind, s.err = llm.KindOf(err), err
	if canceled(w.caller) != nil {
		s.kind = llm.KindCanceled
	} else if s.kind == llm.KindCanceled {
		s.kind = llm.KindUnknown
	}
}

// rateLimitOf is the allowance announced with an answer or a failure.
func rateLimitOf(resp *llm.Response, err error) llm.RateLimit {
	if resp != nil {
		return resp.RateLimit
	}
	var le *llm.Error
	if errors.As(err, &le) {
		return le.RateLimit
	}
	return llm.RateLimit{}
}

// observeStart reports attempt a's start, e, to the observers and
// returns the context to send it under. An observer that panics leaves
// nothing held: what a's policies hold (a half-open breaker's probe slot,
// which would otherwise be held for good) is given back.
func (w *walk) observeStart(ctx context.Context, a *attempt, e observe.AttemptStart) context.Context {
	started := false
	if a.holds.Holding() {
		defer func() {
			if !started {
				a.release(context.Background())
			}
		}()
	}
	ctx, a.obs = w.obs.StartAttempt(ctx, &a.t.ob, e)
	started = true
	return ctx
}

// abandon, deferred around a send, gives back what attempt a holds when
// its provider panics: what its policies hold (a half-open probe slot
// would otherwise be held for good) and its count in flight. The panic
// goes on.
func (a *attempt) abandon() {
	p := recover()
	if p == nil {
		return
	}
	a.release(context.Background())
	if a.t.load != nil {
		a.t.load.End(a.start, 0)
	}
	panic(p)
}

// release settles attempt a as not sent: each of its target's policies
// gives back what it held, and counts nothing.
func (a *attempt) release(ctx context.Context) {
	var pa policy.Attempt
	a.t.policies.Release(ctx, a.settling(&pa), &a.holds)
}

// fair reports whether an attempt that started at start (on c's clock) and
// was cut short by ctx's deadline had a fair chance: at least half of the
// time the call had from its first attempt. Such an attempt counts against
// the target's breaker; a target that hangs until every call's deadline is
// failing, even without a per-attempt Timeout.
func (c *Chain) fair(ctx context.Context, start, begin time.Duration) bool {
	dl, ok := ctx.Deadline()
	if !ok {
		return true
	}
	end := dl.Sub(c.epoch)
	return end-start >= (end-begin)/2
}

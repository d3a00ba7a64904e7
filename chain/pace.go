package chain

// Self-throttling: the wait for a target's slot before an attempt.

import (
	"context"
	"errors"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/throttle"
)

// pace waits for t's self-throttling slot for attempt a (sending req), adding the wait
// to a's. A slot further away than MaxWait or the deadline refuses the
// attempt (recorded as a skip); so does the caller's cancellation. last
// is the target's last failure, if a is a retry.
func (w *walk) pace(a *attempt, req *llm.Request, last *sent) (tried, bool) {
	paced, err := w.reserve(a, req)
	if err == nil {
		a.wait += paced
		return tried{}, false
	}
	a.ticket.Report(retry.Excluded) // not sent: count nothing
	defer func() { w.unpaid = false }()
	switch {
	case errors.Is(err, context.Canceled):
		return tried{err: err, kind: llm.KindCanceled}, true
	case last.err != nil:
		w.unsend(a.t)
		return tried{err: &refusedError{last.err, err}, kind: last.kind}, true
	}
	return tried{err: err, kind: llm.KindRateLimited}, true
}

// reserve takes a's slot (sending req) from t's limiter and sleeps until
// it comes. A slot that goes stale while it waits (the limiter learned the
// provider's limit) is void: it is given back (harmless, the rebuilt
// limiter no longer counts it) and taken again at the new pace. The whole
// wait stays within MaxWait and the deadline, from when a first asked.
func (w *walk) reserve(a *attempt, req *llm.Request) (time.Duration, error) {
	t := a.t
	var asked time.Time
	if w.nowOK {
		asked = w.c.epoch.Add(w.now)
	} else {
		asked = time.Now()
	}
	limit := t.throttle.MaxWait()
	if dl, ok := w.ctx.Deadline(); ok {
		limit = min(limit, dl.Sub(asked))
	}
	for now := asked; ; now = time.Now() {
		waited := now.Sub(asked)
		wait, r, ok := t.throttle.Reserve(now, throttle.EstimateTokens(*req), limit-waited)
		if ok && wait <= 0 {
			return waited, nil
		}
		if !ok {
			reason := "self-throttled: the next slot is " + wait.Round(time.Millisecond).String() + " away"
			n := a.n
			if n == 1 {
				n = 0 // the target is passed over
			}
			w.record(skipped(t, n, a.wait+waited, throttle.ErrThrottled, reason))
			w.obs.skip(&t.ob, n, observe.SkipThrottle, reason, throttle.ErrThrottled)
			return 0, throttle.ErrThrottled
		}
		w.nowOK = false // the first attempt reads its own start
		stale, err := sleepUnless(w.ctx, wait, r.Stale())
		if stale {
			r.Cancel(time.Now())
			continue
		}
		if err != nil {
			r.Cancel(time.Now())
			if cerr := canceled(w.caller); cerr != nil {
				return 0, cerr
			}
			return 0, throttle.ErrThrottled
		}
		return waited + wait, nil
	}
}

package throttle

// The limiter as a policy of a chain's target (package policy): the wait
// for a slot before an attempt, and what each attempt's end teaches it.

import (
	"context"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

// Admit takes attempt a's slot in Send, and makes the call wait for it. A
// slot further away than MaxWait or the call's deadline refuses the
// attempt with ErrThrottled; so does the end of ctx while it waits (a
// caller's cancellation: the walk tells it apart). A hedge or a racer
// takes a slot now or none. An idle limiter (one that paces nothing)
// admits without a clock read; Plan and Peek always admit.
func (l *Limiter) Admit(ctx context.Context, a *policy.Attempt) policy.Admission {
	if a.Phase != policy.Send || !l.paces() || a.Request == nil {
		return policy.Admission{}
	}
	tokens := estimateTokens(*a.Request)
	if a.Hedge {
		if _, _, ok := l.reserve(time.Now(), tokens, 0); !ok { // a limit of 0: a slot now or none
			return policy.Admission{Err: ErrThrottled, Reason: "self-throttled: no slot now", Cause: observe.SkipThrottle}
		}
		return policy.Admission{}
	}
	asked := a.At
	if asked.IsZero() {
		asked = time.Now()
	}
	limit := l.s.MaxWait
	if !a.Deadline.IsZero() {
		limit = min(limit, a.Deadline.Sub(asked))
	}
	// A slot that goes stale while it waits (the limiter learned the
	// provider's limit) is void: it is given back (harmless, the rebuilt
	// limiter no longer counts it) and taken again at the new pace. The
	// whole wait stays within MaxWait and the deadline, from when a first
	// asked.
	for now := asked; ; now = time.Now() {
		waited := now.Sub(asked)
		wait, r, ok := l.reserve(now, tokens, limit-waited)
		if ok && wait <= 0 {
			return policy.Admission{Waited: waited}
		}
		if !ok {
			return policy.Admission{Err: ErrThrottled, Cause: observe.SkipThrottle, Waited: waited,
				Reason: "self-throttled: the next slot is " + wait.Round(time.Millisecond).String() + " away"}
		}
		stale, err := sleepUnless(ctx, wait, r.stale())
		if stale {
			r.release(time.Now())
			continue
		}
		if err != nil {
			r.release(time.Now())
			return policy.Admission{Err: ErrThrottled, Cause: observe.SkipThrottle, Waited: time.Since(asked),
				Reason: "self-throttled: the wait for the next slot was cut short"}
		}
		return policy.Admission{Waited: waited + wait}
	}
}

// Settle teaches the limiter the allowance the provider announced with
// the attempt's answer or failure, and whether it was rate limited; an
// attempt not sent, or canceled by a race, teaches nothing.
func (l *Limiter) Settle(_ context.Context, _ *policy.Attempt, _ policy.Hold, o *policy.Outcome) {
	if o.Sent && !o.Lost {
		l.observe(o.At, o.RateLimit, o.Kind == llm.KindRateLimited)
	}
}

// sleepUnless sleeps for d unless stale is closed first (it reports true)
// or ctx ends (it returns ctx's error).
func sleepUnless(ctx context.Context, d time.Duration, stale <-chan struct{}) (bool, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return false, nil
	case <-stale:
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

package chain

import (
	"context"
	"time"

	"github.com/backstop-llm/backstop/internal/answer"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
)

// The outcomes of a call and of a stream, in observe.CallEnd's Outcome
// and Stream.
const (
	outcomeServed   = "served"
	outcomeDegraded = "degraded"
	outcomeFailed   = "failed"
	outcomeCanceled = "canceled"

	streamComplete   = "complete"
	streamIncomplete = "incomplete"
	streamRestarted  = "restarted"
	streamAbandoned  = "abandoned"
)

// callObs is one call's observers (the chain's observe.Join of them): a
// nil *callObs (nobody observes the call) takes every method as a no-op
// before building any event, so that an unobserved call costs a nil check
// per decision. It also tells a fallback from a retry.
type callObs struct {
	call observe.Call
	// The last target that failed or was skipped and why, until the walk
	// enters another target (a fallback) or retries it.
	last   *observe.Target
	reason string
}

// startCall asks c's observers about a call and returns the context the
// call goes on under and its observers (nil when none observes it).
func (c *Chain) startCall(ctx context.Context, stream bool) (context.Context, *callObs) {
	ctx, call := c.observer.StartCall(ctx, observe.CallStart{Chain: c.name, Stream: stream})
	if call == nil {
		return ctx, nil
	}
	return ctx, &callObs{call: call}
}

// enter reports a fallback when the walk enters t after another target
// failed or was skipped.
func (o *callObs) enter(t *observe.Target) {
	if o.last == nil || o.last == t {
		return
	}
	e := observe.Fallback{From: *o.last, To: *t, Reason: o.reason}
	o.last = nil
	o.call.Event(e)
}

// startAttempt reports the attempt e on t and returns the context to send
// it under.
func (o *callObs) startAttempt(ctx context.Context, t *observe.Target, e observe.AttemptStart) (context.Context, observe.Attempt) {
	if o == nil {
		return ctx, nil
	}
	if !e.Hedge { // a hedge enters no target: the walk is still on the one it races
		o.enter(t)
	}
	e.Target = *t
	return o.call.StartAttempt(ctx, e)
}

// endAttempt reports the end of attempt n on t.
func (o *callObs) endAttempt(a observe.Attempt, t *observe.Target, e observe.AttemptEnd) {
	if o == nil {
		return
	}
	if e.Err != nil {
		o.last, o.reason = t, e.Kind.String()
	}
	e.Target = *t
	if a != nil {
		a.End(e)
	}
}

// firstChunk reports that a streamed attempt sent its first chunk.
func (o *callObs) firstChunk(a observe.Attempt, t *observe.Target, n int, after time.Duration) {
	if o == nil || a == nil {
		return
	}
	a.Event(observe.FirstChunk{Target: *t, N: n, After: after})
}

// retry reports that the walk retries t after attempt n failed.
func (o *callObs) retry(t *observe.Target, n int, kind llm.Kind, wait, retryAfter time.Duration, reason string) {
	if o == nil {
		return
	}
	o.last = nil // a retry is not a fallback
	e := observe.Retry{Target: *t, N: n, Kind: kind, Wait: wait, RetryAfter: retryAfter, Reason: reason}
	o.call.Event(e)
}

// skip reports that t, or its attempt n, was passed over.
func (o *callObs) skip(t *observe.Target, n int, cause observe.SkipCause, reason string, err error) {
	if o == nil {
		return
	}
	o.enter(t)
	o.last, o.reason = t, "skipped"
	e := observe.Skip{Target: *t, N: n, Cause: cause, Reason: reason, Err: err}
	o.call.Event(e)
}

// gateClosed reports that a Retry-After closed t until until.
func (o *callObs) gateClosed(t *observe.Target, until time.Time) {
	if o == nil {
		return
	}
	e := observe.GateClosed{Target: *t, Until: until}
	o.call.Event(e)
}

// validationFailed reports that t's answer broke its schema with err.
func (o *callObs) validationFailed(t *observe.Target, err error) {
	if o == nil {
		return
	}
	paths, keywords := answer.Violations(err)
	e := observe.ValidationFailed{Target: *t, Paths: paths, Keywords: keywords}
	o.call.Event(e)
}

// sharedLocal reports that the call decides with local state.
func (o *callObs) sharedLocal() {
	if o == nil {
		return
	}
	o.call.Event(observe.SharedLocal{})
}

// end reports the end of the call.
func (o *callObs) end(e observe.CallEnd) {
	if o == nil {
		return
	}
	o.call.End(e)
}

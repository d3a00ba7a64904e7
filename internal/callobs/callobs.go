// Package callobs tells one call's observers of its decisions: it builds
// each event only when someone observes the call (a nil *Call takes every
// method as a no-op), and tells a fallback from a retry.
package callobs

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
	Served   = "served"
	Degraded = "degraded"
	Failed   = "failed"
	Canceled = "canceled"

	StreamComplete   = "complete"
	StreamIncomplete = "incomplete"
	StreamRestarted  = "restarted"
	StreamAbandoned  = "abandoned"
)

// Call is one call's observers (the chain's observe.Join of them): a nil
// *Call (nobody observes the call) takes every method as a no-op before
// building any event, so that an unobserved call costs a nil check per
// decision.
type Call struct {
	call observe.Call
	// The last target that failed or was skipped and why, until the walk
	// enters another target (a fallback) or retries it.
	last   *observe.Target
	reason string
}

// Start asks o about the call e and returns the context the call goes on
// under and its observers (nil when none observes it).
func Start(ctx context.Context, o observe.Observer, e observe.CallStart) (context.Context, *Call) {
	ctx, call := o.StartCall(ctx, e)
	if call == nil {
		return ctx, nil
	}
	return ctx, &Call{call: call}
}

// enter reports a fallback when the walk enters t after another target
// failed or was skipped.
func (o *Call) enter(t *observe.Target) {
	if o.last == nil || o.last == t {
		return
	}
	e := observe.Fallback{From: *o.last, To: *t, Reason: o.reason}
	o.last = nil
	o.call.Event(e)
}

// StartAttempt reports the attempt e on t and returns the context to send
// it under.
func (o *Call) StartAttempt(ctx context.Context, t *observe.Target, e observe.AttemptStart) (context.Context, observe.Attempt) {
	if o == nil {
		return ctx, nil
	}
	if !e.Hedge { // a hedge enters no target: the walk is still on the one it races
		o.enter(t)
	}
	e.Target = *t
	return o.call.StartAttempt(ctx, e)
}

// EndAttempt reports the end e of attempt a on t.
func (o *Call) EndAttempt(a observe.Attempt, t *observe.Target, e observe.AttemptEnd) {
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

// FirstChunk reports that a streamed attempt a, number n on t, sent its
// first chunk after after.
func (o *Call) FirstChunk(a observe.Attempt, t *observe.Target, n int, after time.Duration) {
	if o == nil || a == nil {
		return
	}
	a.Event(observe.FirstChunk{Target: *t, N: n, After: after})
}

// Retry reports that the walk retries t after attempt n failed.
func (o *Call) Retry(t *observe.Target, n int, kind llm.Kind, wait, retryAfter time.Duration, reason string) {
	if o == nil {
		return
	}
	o.last = nil // a retry is not a fallback
	e := observe.Retry{Target: *t, N: n, Kind: kind, Wait: wait, RetryAfter: retryAfter, Reason: reason}
	o.call.Event(e)
}

// Skip reports that t, or its attempt n, was passed over.
func (o *Call) Skip(t *observe.Target, n int, cause observe.SkipCause, reason string, err error) {
	if o == nil {
		return
	}
	o.enter(t)
	o.last, o.reason = t, "skipped"
	e := observe.Skip{Target: *t, N: n, Cause: cause, Reason: reason, Err: err}
	o.call.Event(e)
}

// GateClosed reports that a Retry-After closed t until until.
func (o *Call) GateClosed(t *observe.Target, until time.Time) {
	if o == nil {
		return
	}
	e := observe.GateClosed{Target: *t, Until: until}
	o.call.Event(e)
}

// ValidationFailed reports that t's answer broke its schema with err.
func (o *Call) ValidationFailed(t *observe.Target, err error) {
	if o == nil {
		return
	}
	paths, keywords := answer.Violations(err)
	e := observe.ValidationFailed{Target: *t, Paths: paths, Keywords: keywords}
	o.call.Event(e)
}

// SharedLocal reports that the call decides with local state.
func (o *Call) SharedLocal() {
	if o == nil {
		return
	}
	o.call.Event(observe.SharedLocal{})
}

// End reports the end of the call.
func (o *Call) End(e observe.CallEnd) {
	if o == nil {
		return
	}
	o.call.End(e)
}

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

// callObs delivers one call's events to the observers that observe it. A
// nil *callObs (nobody does) takes every method as a no-op before building
// any event, so that an unobserved call costs a nil check per decision.
type callObs struct {
	one  observe.Call
	more []observe.Call
	// The last target that failed or was skipped and why, until the walk
	// enters another target (a fallback) or retries it.
	last   *observe.Target
	reason string
}

// startCall asks every observer of c about a call and returns the context
// the call goes on under and its observers (nil when none observes it).
func (c *Chain) startCall(ctx context.Context, stream bool) (context.Context, *callObs) {
	var o *callObs
	for _, ob := range c.observers {
		var call observe.Call
		ctx, call = ob.StartCall(ctx, observe.CallStart{Chain: c.name, Stream: stream})
		if call == nil {
			continue
		}
		if o == nil {
			o = &callObs{one: call}
		} else {
			o.more = append(o.more, call)
		}
	}
	return ctx, o
}

// event delivers e to every observer of the call: e is boxed once, and
// only when somebody observes the call (o is not nil).
func (o *callObs) event(e observe.Event) {
	o.one.Event(e)
	for _, c := range o.more {
		c.Event(e)
	}
}

// attemptObs delivers one attempt's events.
type attemptObs struct {
	one  observe.Attempt
	more []observe.Attempt
}

// enter reports a fallback when the walk enters t after another target
// failed or was skipped.
func (o *callObs) enter(t *observe.Target) {
	if o.last == nil || o.last == t {
		return
	}
	e := observe.Fallback{From: *o.last, To: *t, Reason: o.reason}
	o.last = nil
	o.event(e)
}

// startAttempt reports the attempt e on t and returns the context to send
// it under.
func (o *callObs) startAttempt(ctx context.Context, t *observe.Target, e observe.AttemptStart) (context.Context, attemptObs) {
	var a attemptObs
	if o == nil {
		return ctx, a
	}
	if !e.Hedge { // a hedge enters no target: the walk is still on the one it races
		o.enter(t)
	}
	e.Target = *t
	var first observe.Attempt
	ctx, first = o.one.StartAttempt(ctx, e)
	a.one = first
	for _, c := range o.more {
		var x observe.Attempt
		ctx, x = c.StartAttempt(ctx, e)
		if x != nil {
			a.more = append(a.more, x)
		}
	}
	return ctx, a
}

// endAttempt reports the end of attempt n on t.
func (o *callObs) endAttempt(a attemptObs, t *observe.Target, e observe.AttemptEnd) {
	if o == nil {
		return
	}
	if e.Err != nil {
		o.last, o.reason = t, e.Kind.String()
	}
	e.Target = *t
	if a.one != nil {
		a.one.End(e)
	}
	for _, x := range a.more {
		x.End(e)
	}
}

// firstChunk reports that a streamed attempt sent its first chunk.
func (o *callObs) firstChunk(a attemptObs, t *observe.Target, n int, after time.Duration) {
	if o == nil {
		return
	}
	var e observe.Event = observe.FirstChunk{Target: *t, N: n, After: after}
	if a.one != nil {
		a.one.Event(e)
	}
	for _, x := range a.more {
		x.Event(e)
	}
}

// retry reports that the walk retries t after attempt n failed.
func (o *callObs) retry(t *observe.Target, n int, kind llm.Kind, wait, retryAfter time.Duration, reason string) {
	if o == nil {
		return
	}
	o.last = nil // a retry is not a fallback
	e := observe.Retry{Target: *t, N: n, Kind: kind, Wait: wait, RetryAfter: retryAfter, Reason: reason}
	o.event(e)
}

// skip reports that t, or its attempt n, was passed over.
func (o *callObs) skip(t *observe.Target, n int, cause observe.SkipCause, reason string, err error) {
	if o == nil {
		return
	}
	o.enter(t)
	o.last, o.reason = t, "skipped"
	e := observe.Skip{Target: *t, N: n, Cause: cause, Reason: reason, Err: err}
	o.event(e)
}

// gateClosed reports that a Retry-After closed t until until.
func (o *callObs) gateClosed(t *observe.Target, until time.Time) {
	if o == nil {
		return
	}
	e := observe.GateClosed{Target: *t, Until: until}
	o.event(e)
}

// validationFailed reports that t's answer broke its schema with err.
func (o *callObs) validationFailed(t *observe.Target, err error) {
	if o == nil {
		return
	}
	paths, keywords := answer.Violations(err)
	e := observe.ValidationFailed{Target: *t, Paths: paths, Keywords: keywords}
	o.event(e)
}

// sharedLocal reports that the call decides with local state.
func (o *callObs) sharedLocal() {
	if o == nil {
		return
	}
	o.event(observe.SharedLocal{})
}

// end reports the end of the call.
func (o *callObs) end(e observe.CallEnd) {
	if o == nil {
		return
	}
	o.one.End(e)
	for _, c := range o.more {
		c.End(e)
	}
}

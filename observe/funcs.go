package observe

import "context"

// Funcs is an Observer made of functions, in the style of failsafe-go's
// OnRetry and OnFallback: set the ones you need, leave the others nil.
// Each is called on the goroutine of the call it belongs to (the breaker's
// and the shared store's on whichever goroutine saw the change). Use a
// pointer: chain.New(...).Observe(&observe.Funcs{OnRetry: ...}).
type Funcs struct {
	// OnCallStart and OnCallEnd: a call starts; it ended (nothing follows).
	OnCallStart func(CallStart)
	OnCallEnd   func(CallEnd)
	// OnAttemptStart, OnFirstChunk and OnAttemptEnd: an attempt is sent (or
	// a degradation asked); a streamed one sent its first chunk; it ended.
	OnAttemptStart func(AttemptStart)
	OnFirstChunk   func(FirstChunk)
	OnAttemptEnd   func(AttemptEnd)
	// OnRetry: the same target is tried again after a wait.
	OnRetry func(Retry)
	// OnSkip: a target or a retry was passed over without a request.
	OnSkip func(Skip)
	// OnFallback: the walk moves on to the next target.
	OnFallback func(Fallback)
	// OnGateClosed: a Retry-After closed a target for other calls.
	OnGateClosed func(GateClosed)
	// OnValidationFailed: an answer did not pass its schema.
	OnValidationFailed func(ValidationFailed)
	// OnSharedLocal: the shared state did not answer; the call decides
	// with this replica's own.
	OnSharedLocal func()
	// OnBreakerChange and OnSharedUnavailable: changes of state that belong
	// to no call (see StateObserver).
	OnBreakerChange     func(BreakerChange)
	OnSharedUnavailable func(SharedUnavailable)
}

var (
	_ Observer      = (*Funcs)(nil)
	_ StateObserver = (*Funcs)(nil)
)

// StartCall implements Observer.
func (f *Funcs) StartCall(ctx context.Context, e CallStart) (context.Context, Call) {
	tell(f.OnCallStart, e)
	return ctx, funcsCall{f}
}

// Event implements StateObserver: it calls OnBreakerChange or
// OnSharedUnavailable.
func (f *Funcs) Event(e Event) {
	switch e := e.(type) {
	case BreakerChange:
		tell(f.OnBreakerChange, e)
	case SharedUnavailable:
		tell(f.OnSharedUnavailable, e)
	}
}

// funcsCall is a Funcs observing one call; it holds nothing of its own.
type funcsCall struct{ f *Funcs }

func (c funcsCall) StartAttempt(ctx context.Context, e AttemptStart) (context.Context, Attempt) {
	tell(c.f.OnAttemptStart, e)
	return ctx, funcsAttempt(c)
}

func (c funcsCall) Event(e Event) {
	switch e := e.(type) {
	case Retry:
		tell(c.f.OnRetry, e)
	case Skip:
		tell(c.f.OnSkip, e)
	case Fallback:
		tell(c.f.OnFallback, e)
	case GateClosed:
		tell(c.f.OnGateClosed, e)
	case ValidationFailed:
		tell(c.f.OnValidationFailed, e)
	case SharedLocal:
		if c.f.OnSharedLocal != nil {
			c.f.OnSharedLocal()
		}
	}
}

func (c funcsCall) End(e CallEnd) { tell(c.f.OnCallEnd, e) }

// funcsAttempt is a Funcs observing one attempt.
type funcsAttempt struct{ f *Funcs }

func (a funcsAttempt) Event(e Event) {
	if e, ok := e.(FirstChunk); ok {
		tell(a.f.OnFirstChunk, e)
	}
}

func (a funcsAttempt) End(e AttemptEnd) { tell(a.f.OnAttemptEnd, e) }

// tell calls on with e, if it is set.
func tell[E any](on func(E), e E) {
	if on != nil {
		on(e)
	}
}

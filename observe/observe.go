// Package observe owns the events of a chain's walk: one typed event per
// decision the executor takes (a call starting and ending, each attempt
// starting and ending, a retry with its wait, a target skipped and why, a
// fallback, a Retry-After gate closing, a schema failure, a breaker
// changing state), and the Observer interfaces that receive them.
//
// A chain delivers its events to the observers its Builder was given
// (chain.Builder.Observe), joined into one by Join. OpenTelemetry (package
// tracing) is one observer, on by default; Log, in this package, writes
// them to a log/slog Logger; Funcs turns plain functions into an observer. An observer that has
// nothing to record for a call returns a nil Call from StartCall, and the
// chain then builds no event for it: a call nobody observes costs nothing
// extra.
//
// Events never carry an API key. They carry the request and the answer
// (AttemptStart.Request, AttemptEnd.Response) because an observer may be
// told to record them (tracing's CaptureContent); an observer that records
// content must say so and be off by default.
package observe

import (
	"context"
	"errors"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/spread"
)

// Observer receives the events of every call of a chain. Its methods may
// be called from many goroutines at once.
type Observer interface {
	// StartCall is called as a call starts. It returns the context the
	// call goes on under (ctx, or one carrying a span), and the Call that
	// receives the call's further events; a nil Call observes nothing more
	// of it.
	StartCall(ctx context.Context, e CallStart) (context.Context, Call)
}

// Call receives the events of one call, in the order they happen, from
// the goroutine that made the call.
type Call interface {
	// StartAttempt is called before a request is sent to a target (or a
	// degradation is asked). It returns the context to send it under, and
	// the Attempt that receives the attempt's events and end; nil for
	// none.
	StartAttempt(ctx context.Context, e AttemptStart) (context.Context, Attempt)
	// Event receives every decision of the call between its start and
	// its end: a Retry, a Skip, a Fallback, a GateClosed, a
	// ValidationFailed, a SharedLocal. Switch on its type and ignore the
	// types you do not know: a later version may add events, and an
	// observer that ignores them keeps working.
	Event(e Event)
	// End: the call ended. No event follows.
	End(e CallEnd)
}

// Attempt receives the events and the end of one attempt.
type Attempt interface {
	// Event receives the attempt's events before its end: a FirstChunk
	// (a streamed attempt sent its first chunk). Ignore the types you do
	// not know, as for Call.Event.
	Event(e Event)
	// End: the attempt ended (for a stream, when the stream did).
	End(e AttemptEnd)
}

// Event is one event of a call, of an attempt, or of a chain's state. It
// is one of this package's event types (Retry, Skip, Fallback,
// GateClosed, ValidationFailed, SharedLocal, FirstChunk, BreakerChange,
// SharedUnavailable); the set is closed to other packages so that it can
// grow: an observer switches on the type and ignores the ones it does not
// know, and a new event compiles and runs with every observer written
// before it.
type Event interface {
	event()
}

func (Retry) event()             {}
func (Skip) event()              {}
func (Fallback) event()          {}
func (GateClosed) event()        {}
func (ValidationFailed) event()  {}
func (SharedLocal) event()       {}
func (FirstChunk) event()        {}
func (BreakerChange) event()     {}
func (SharedUnavailable) event() {}

// Binder is implemented by an observer that prepares for a chain once, at
// Build: it is given the chain's name and every target and degradation,
// in order (Target.Index is the position in that list). An error fails
// Build.
type Binder interface {
	Bind(chain string, targets []Target) error
}

// StateObserver is implemented by an observer that also wants the changes
// of state that belong to no call. Event receives them: a BreakerChange
// (reported from inside the breaker, keep it quick), a SharedUnavailable
// (a shared store, Redis, stopped answering). Ignore the types you do not
// know, as for Call.Event.
type StateObserver interface {
	Event(e Event)
}

// Target identifies a model target or a degradation of a chain.
type Target struct {
	// Name is the target's name, unique in its chain.
	Name string
	// Tier is "primary", "deployment", "sibling", "provider" or
	// "degrade".
	Tier string
	// Provider is the provider's Name; "" for a degradation.
	Provider string
	// Model is the model requested; "" for a degradation.
	Model string
	// Index is the target's place in the chain, from 0: the model targets
	// in order, then the degradations.
	Index int
}

// CallStart starts a call.
type CallStart struct {
	// Chain is the chain's name.
	Chain string
	// Stream is true for Chain.Stream.
	Stream bool
}

// AttemptStart starts an attempt.
type AttemptStart struct {
	Target Target
	// N counts the attempts on this target, from 1.
	N int
	// Request is the request as sent to this target: its Model, System and
	// Params applied. It holds the prompt: record it only when told to.
	Request llm.Request
	// Choice explains why the attempt went to this target when its tier
	// spreads its calls; nil in an ordered tier.
	Choice *spread.Choice
	// Hedge is true for a hedge: the same request as an attempt on
	// another target of the tier (HedgeOf) that had not answered after
	// HedgeDelay.
	Hedge      bool
	HedgeOf    string
	HedgeDelay time.Duration
}

// AttemptEnd ends an attempt.
type AttemptEnd struct {
	Target Target
	N      int
	// Response is the answer, also one that failed its schema; nil when
	// none arrived. It holds the answer: record it only when told to.
	Response *llm.Response
	// Status is the HTTP status (200 for an answer, 0 when none arrived).
	Status int
	// RequestID is the provider's request id for the attempt, whether it
	// answered or failed: its answer's, its *llm.Error's, or the one a
	// stream's response headers carried before it failed or lost its
	// race; "" when none arrived. Search logs and traces by it.
	RequestID string
	// Kind classifies the failure; KindUnknown on success.
	Kind llm.Kind
	// Err is the failure; nil on success.
	Err error
	// Duration is how long the attempt took.
	Duration time.Duration
	// Lost is true for an attempt of a hedged race that another attempt
	// won: canceled when the winner answered (Err says so), or failed
	// before it.
	Lost bool
	// Cost is what the attempt cost (chain.Attempt.Cost).
	Cost cost.Cost
}

// ProviderRequestID returns the provider's request id for the attempt e
// ended: e.RequestID, else its answer's, else the one its *llm.Error
// carries however deeply wrapped (a failure's id is otherwise only in the
// error's text, which a search by request-id does not read); "" when none
// did. observe.Log and tracing record it.
func (e *AttemptEnd) ProviderRequestID() string {
	if e.RequestID != "" {
		return e.RequestID
	}
	if e.Response != nil && e.Response.RequestID != "" {
		return e.Response.RequestID
	}
	var le *llm.Error
	if e.Err != nil && errors.As(e.Err, &le) {
		return le.RequestID
	}
	return ""
}

// Retry says the chain will retry a target.
type Retry struct {
	Target Target
	// N is the attempt that failed; the retry is N+1.
	N int
	// Kind is the failure retried.
	Kind llm.Kind
	// Wait is how long the chain waits first; RetryAfter what the provider
	// asked for (0: nothing).
	Wait, RetryAfter time.Duration
	// Reason says why, when more than the kind does ("retry-after 4s",
	// "re-asked with the schema's problems"); often empty.
	Reason string
}

// SkipCause is why a target was passed over.
type SkipCause uint8

// The causes of a Skip.
const (
	// SkipBreaker: its circuit breaker is open (here or on another
	// replica), or half-open with its probe in flight.
	SkipBreaker SkipCause = iota
	// SkipBudget: its retry budget is exhausted (a retry only).
	SkipBudget
	// SkipGate: a Retry-After closed it.
	SkipGate
	// SkipThrottle: its self-throttling slot is too far away.
	SkipThrottle
	// SkipContextWindow: its context window is not larger than the one a
	// prompt overflowed.
	SkipContextWindow
	// SkipDeadline: the deadline passed before it was tried.
	SkipDeadline
	// SkipCapability: the request carries what it cannot take (tools,
	// images, documents, a native schema).
	SkipCapability
	// SkipPrice: its worst case for the request is more than its price
	// cap allows (chain.Builder.CapPrice).
	SkipPrice
	// SkipSpend: a money budget (package spend) cannot cover its worst
	// case, or its price is unknown and the budget wants it known.
	SkipSpend
)

// String returns the cause's name.
func (c SkipCause) String() string {
	switch c {
	case SkipBreaker:
		return "breaker"
	case SkipBudget:
		return "budget"
	case SkipGate:
		return "gate"
	case SkipThrottle:
		return "throttle"
	case SkipContextWindow:
		return "context_window"
	case SkipDeadline:
		return "deadline"
	case SkipCapability:
		return "capability"
	case SkipPrice:
		return "price"
	case SkipSpend:
		return "spend"
	}
	return "unknown"
}

// Skip says a target, or a retry of it, was passed over without a request.
type Skip struct {
	Target Target
	// N is the attempt that was not sent: 0 for a target passed over,
	// the retry's number for a retry refused.
	N     int
	Cause SkipCause
	// Reason says why in words; Err is the error recorded for it.
	Reason string
	Err    error
}

// Fallback says the chain moves on from a target to the next one.
type Fallback struct {
	From, To Target
	// Reason is the kind the From target last failed with, or "skipped".
	Reason string
}

// GateClosed says a target was closed until Until by a Retry-After.
type GateClosed struct {
	Target Target
	Until  time.Time
}

// ValidationFailed says an answer did not pass its schema, at Paths (JSON
// Pointers, one per violation) with Keywords. No answer text is carried.
type ValidationFailed struct {
	Target          Target
	Paths, Keywords []string
}

// SharedLocal says the shared state (Redis) did not answer; the call
// decides with this replica's own.
type SharedLocal struct{}

// FirstChunk says a streamed attempt sent its first chunk After this long.
type FirstChunk struct {
	Target Target
	N      int
	After  time.Duration
}

// CallEnd ends a call.
type CallEnd struct {
	// Served is what answered; nil when nothing did.
	Served *Target
	// Model and RequestID are the answer's, as the provider sent them.
	Model, RequestID string
	// Degraded is true when a degradation answered; Age is a remembered
	// answer's age.
	Degraded bool
	Age      time.Duration
	// Outcome is "served" (a model target answered), "degraded" (a
	// degradation did), "failed" or "canceled" (the caller gave up). It is
	// the backstop.outcome of the calls metric.
	Outcome string
	// ErrorType is, on failure, "exhausted", "canceled", "incomplete",
	// "over_budget" (a money budget refused it) or the kind that stopped
	// the call; "" on success (a stream the caller
	// abandoned is a success here, with Stream "abandoned").
	ErrorType string
	// Err is the call's error; nil on success.
	Err error
	// Stream is, for a streamed call, "complete", "restarted" (complete
	// after RestartStreams restarted it on another target), "incomplete"
	// (cut short after its first chunk) or "abandoned" (the caller stopped
	// reading); "" for Call and for a stream that failed before its first
	// chunk.
	Stream string
	// Attempts is how many requests were sent (degradations included).
	Attempts int
	// Cost is what the call's attempts cost together (chain.Result.Cost).
	Cost cost.Cost
}

// BreakerChange says a target's breaker changed state.
type BreakerChange struct {
	Chain    string
	Target   Target
	From, To string // "closed", "half-open", "open"
}

// SharedUnavailable says a shared store stopped answering.
type SharedUnavailable struct {
	Chain string
	// Store is "breaker", "budget" (a retry budget), "hedge" (a hedge
	// budget) or "cache".
	Store string
	// Target is the target whose store it is; "" for the chain's.
	Target string
}

// Package policy is the seam between a chain's walk and the policies that
// decide for it. Before an attempt on a target, the walk asks the target's
// policies in order whether it may be sent (Admit); after the attempt, it
// tells each policy it asked how it ended (Settle). The walk never
// calls a policy by name: the circuit breaker, the Retry-After gate, the
// retry budget, the hedge budget, self-throttling and the capability check
// are all policies on this seam, in their own packages, and a new one (a
// money budget, a per-tenant limit) is a new package and one line where
// the chain is built (or a user's chain.Target.Policies).
//
// The walk asks in three phases: Send, before an attempt is sent; Plan,
// before a retry's backoff (a budget spends here, an open breaker refuses
// here and spares the call the wait); Peek, to choose where to go (a
// hedge's target, whether a later target could take the call), holding
// nothing.
//
// A policy answers with an Admission. A refusal carries the error the walk
// records among the call's causes (matched with errors.Is, as
// breaker.ErrOpen or budget.ErrExhausted are), the reason it writes in the
// attempt's record, and the telemetry cause of the skip. A policy may make
// the call wait (self-throttling waits for its slot, a breaker on the
// call's last target waits for its probe) under the context it is given,
// and says how long it waited; the walk counts it in the attempt's Wait.
//
// What a policy holds for an admitted attempt (a half-open breaker's probe
// slot, a retry withdrawn from a budget) it puts
// in the Admission's Hold; the walk gives the Hold back to Settle, once,
// whether the attempt was sent or not (Outcome.Sent), so that nothing is
// held for good.
package policy

import (
	"context"
	"time"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
)

// Policy decides whether an attempt on its target may be sent, and learns
// how the attempts it admitted ended. A Policy belongs to one target of a
// chain (or to several, when they share it, as a tier's targets share
// their hedge budget) and is called by many calls at once: it must be safe
// for concurrent use. Admit and Settle run on the call's goroutine, on
// every attempt: a policy keeps them cheap when it has nothing to say.
type Policy interface {
	// Admit answers for attempt a. It returns the zero Admission to admit
	// and hold nothing.
	Admit(ctx context.Context, a *Attempt) Admission
	// Settle is told how an attempt it was asked about in Plan or Send
	// ended, with the Hold its Admission gave (the zero Hold when it held
	// nothing, or refused): sent, or not (Outcome.Sent false: refused by
	// another policy, or the wait before it cut short).
	Settle(ctx context.Context, a *Attempt, h Hold, o *Outcome)
}

// Phase is when the walk asks.
type Phase uint8

// The phases of an attempt.
const (
	// Send: the attempt is about to be sent. A first attempt is asked in
	// this phase only; a retry, after Plan and the backoff.
	Send Phase = iota
	// Plan: a retry was decided and is about to wait its backoff. A policy
	// that would refuse it anyway refuses now, sparing the call the wait;
	// one that spends on a retry (a retry budget) spends now.
	Plan
	// Peek: the walk asks whether the policy would admit an attempt now,
	// to choose where to go (a later target that could take the call, a
	// hedge's target); the policy holds nothing and waits for nothing, and
	// is not settled.
	Peek
)

// Attempt is what a policy is asked about and told of. The walk owns it:
// a policy must not keep it past the call.
type Attempt struct {
	// Phase is when the walk asks.
	Phase Phase
	// Target is the target's name, N the attempt's number on it in this
	// call (1 for the first, 2 for the first retry, ...).
	Target string
	N      int
	// Hedge is set for an attempt sent to race another (a hedge, or the
	// patience race's racer): a policy neither waits for it (a slot now or
	// none) nor makes the call wait.
	Hedge bool
	// Last is set when nothing after this target could answer the call
	// (it is the last model target, no degradation follows, it does not
	// hedge) and the call has not waited yet: a policy that would refuse
	// may make the call wait for it instead, once.
	Last bool
	// At is when the walk asked (the monotonic clock), and Deadline the
	// call's deadline (zero: none): a wait past it is a refusal.
	At       time.Time
	Deadline time.Time
	// Request is the request the attempt sends (prepared for the target),
	// nil in Plan and Peek. Caller is the call's request as the caller
	// gave it, before any target's System, Params or native schema (and
	// without a re-ask's turns, which Request holds), set with Request: a
	// policy that prices the attempt against another target (the price
	// cap) prepares it as that target would.
	Request *llm.Request
	Caller  *llm.Request
	// Needs is what the call's request carries beyond text; Media is the
	// request when its media types must be checked (nil otherwise);
	// MinWindow is the context window a target must exceed after one
	// overflowed in this call (-1 before).
	Needs     llm.Capabilities
	Media     *llm.Request
	MinWindow int
	// Price is the target's price (chain.Target.Price, or the
	// catalogue's), zero fields unknown; MaxOutput its model's output
	// limit from the catalogue (0: unknown). WorstCase reads them.
	Price     catalog.Price
	MaxOutput int
}

// WorstCase is the most the attempt may cost (cost.WorstCase): its
// Request's estimated prompt and output limit at the target's Price.
// Request is nil in Plan and Peek: it is then the request the walk sends
// the target, which a policy that prices Plan or Peek attempts must be
// given otherwise (a zero Cost, Unpriced, when it is not).
func (a *Attempt) WorstCase() cost.Cost {
	if a.Request == nil {
		return cost.Cost{Unpriced: true}
	}
	return cost.WorstCase(a.Request, a.Price, a.MaxOutput)
}

// Admission is a policy's answer to Admit.
type Admission struct {
	// Err is nil to admit the attempt, or the refusal: the error the walk
	// records among the call's causes.
	Err error
	// Reason says why, in words, for the attempt's record; Cause is the
	// refusal's telemetry cause.
	Reason string
	Cause  observe.SkipCause
	// Stop, with Err, ends the call with Err: no other target is tried
	// and no degradation answers (a money budget that refuses rather
	// than degrades). A hedge or a racer it refuses is not sent, and no
	// other target is asked to take it. Ignored in Peek.
	Stop bool
	// Soft, with Err, marks a refusal in Plan that stands only if, after
	// the backoff, no policy makes the call wait in Send: a retry budget
	// exhausted on the call's last target yields to the breaker's probe
	// when many failing calls opened the breaker meanwhile.
	Soft bool
	// Defer, in Plan and without Err, admits the retry while the policy
	// cannot tell before the backoff (an open breaker on the call's last
	// target, whose probe the call may wait for then): no policy after it
	// is asked in Plan (nothing is spent on the retry), and the policy
	// decides in Send.
	Defer bool
	// Waited is how long the policy made the call wait before it answered
	// (a throttle's slot, a breaker's probe), counted in the attempt's
	// Wait.
	Waited time.Duration
	// Awaited reports that the policy would have refused, and made the
	// call wait instead (Attempt.Last): a call does so at most once.
	Awaited bool
	// Hold is what the policy holds for the admitted attempt, given back
	// to Settle.
	Hold Hold
}

// Hold is what a policy holds for an attempt it admitted: its own words,
// given back to Settle. Ref holds a pointer (or a func, a map, a channel:
// anything pointer-shaped, which an interface holds without allocating);
// N a number. The zero Hold holds nothing.
type Hold struct {
	Ref any
	N   uint64
}

// Outcome is how an admitted attempt ended.
type Outcome struct {
	// Sent is false when the attempt was not sent after all (a later
	// policy refused it, the wait before it was cut short, the call
	// moved on): a policy gives back what it held, and counts nothing.
	Sent bool
	// Lost marks a sent attempt that another of its race answered first,
	// canceled before it ended: it counts for its target's health as
	// Verdict says (retry.Excluded, or retry.Failure when it outlived its
	// patience) and for nothing else.
	Lost bool
	// Verdict is how the attempt counts for its target's health: the
	// decision table's breaker column for the attempt's kind, or
	// retry.NotFailure for a success, retry.Excluded for an attempt cut
	// short before it had a fair chance.
	Verdict retry.BreakerVerdict
	// Success reports an answer that was served or could have been.
	Success bool
	// Kind is the failure's kind (llm.KindUnknown on success), Err the
	// failure.
	Kind llm.Kind
	Err  error
	// Response is the answer, when one arrived (also one that failed its
	// schema): its Usage and RateLimit are the attempt's spend and the
	// provider's allowance.
	Response *llm.Response
	// RateLimit is the allowance the provider announced with its answer
	// or its failure.
	RateLimit llm.RateLimit
	// At is when the attempt ended (the monotonic clock), Elapsed how
	// long it took.
	At      time.Time
	Elapsed time.Duration
	// Cost is what the attempt cost: its answer's usage at the target's
	// price, a stream cut short priced by what it had sent (Estimated),
	// an answer that failed its schema priced as any answer; zero for an
	// attempt not sent, or that failed before an answer.
	Cost cost.Cost
}

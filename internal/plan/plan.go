// Package plan is the planner of package chain: what follows a failed
// attempt, decided from the failure and its limits by the target's decision
// table (package retry). It is a pure function: no clock, no randomness (the
// backoff is drawn by the caller), no I/O. Only chain uses it; it lives
// outside chain so that the walk records and the decisions are read apart.
package plan

import (
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// Failure is what Decide needs to know of a failed attempt.
type Failure struct {
	Kind llm.Kind
	// N is the attempt that failed, from 1.
	N int
	// RetryAfter is what the provider asked for (0: nothing);
	// ShouldRetry its x-should-retry header (nil: absent).
	RetryAfter  time.Duration
	ShouldRetry *bool
	// Invalid is true for an answer that failed its schema: it is re-asked
	// at once, with the problems.
	Invalid bool
}

// Limits is what Decide needs to know of the target and the call.
type Limits struct {
	// Table is the target's decision table, Policy its retry policy (with
	// defaults), Backoff the wait the policy drew for this retry
	// (Retry-After as its floor).
	Table   retry.Table
	Policy  retry.Policy
	Backoff time.Duration
	// Left is the time until the deadline; HasDeadline is false when the
	// call has none.
	Left        time.Duration
	HasDeadline bool
	// ContentFallback is whether the chain lets a content refusal move on.
	ContentFallback bool
	// Elsewhere names the target's tier when a retry goes to another
	// target of it first (the tier spreads, and one is still to be tried
	// in this call); "" otherwise.
	Elsewhere string
	// Onward is true when a later target of the chain can take the call
	// now: a failure whose row says ElsewhereFirst moves on to it.
	Onward bool
}

// Decision is what the walk does after a failed attempt; chain records it
// as its own Decision of the same name.
type Decision uint8

// The decisions a Step makes.
const (
	// Retry: the same target again, after Step.Wait.
	Retry Decision = iota + 1
	// Next: the next target.
	Next
	// Stop: the call ends.
	Stop
)

// Step is what the walk does after a failed attempt.
type Step struct {
	// Decision is Retry (wait first), Next or Stop; Reason says why, in
	// words.
	Decision Decision
	Wait     time.Duration
	Reason   string
	// CloseGate is true when the target asked for a wait longer than calls
	// will wait (over MaxRetryAfter, or past this call's deadline): its
	// gate closes, so that concurrent calls skip it instead of each
	// rediscovering the 429. A Retry-After this call leaves for any other
	// reason (its attempts used, another target of a spreading tier, a
	// budget that refused the retry) closes nothing: other calls may still
	// wait it out, and one 429 among many successes must not shut the
	// target for every caller.
	CloseGate bool
}

// Decide decides what follows a failed attempt. A retry it grants may
// still be refused by the target's policies (breaker, budget), which the
// walk asks next.
func Decide(f Failure, l Limits) Step {
	if allowed := Attempts(l.Table, f.Kind, l.Policy, f.ShouldRetry); f.N >= allowed {
		if allowed <= 1 {
			return Leave(f, l, f.Kind.String()+" is not retried")
		}
		return Leave(f, l, fmt.Sprintf("%d of %d attempts used", f.N, allowed))
	}
	if f.RetryAfter > l.Policy.MaxRetryAfter {
		return Leave(f, l, fmt.Sprintf("retry-after %v exceeds MaxRetryAfter %v", f.RetryAfter, l.Policy.MaxRetryAfter))
	}
	if l.Onward && l.Table.Rule(f.Kind).ElsewhereFirst {
		if s := Leave(f, l, f.Kind.String()+": another target is tried first"); s.Decision == Next {
			return s
		}
	}
	if l.Elsewhere != "" {
		// A retry goes to another target of the tier first, without a
		// wait (Retry-After speaks of this target alone), unless the
		// next-target column keeps the call here: then it retries here.
		if s := Leave(f, l, "retried on another "+l.Elsewhere+" target first"); s.Decision == Next {
			return s
		}
	}
	wait := l.Backoff
	if f.Invalid {
		wait = 0
	}
	if l.HasDeadline && l.Left < wait {
		return Leave(f, l, fmt.Sprintf("a wait of %v would end past the deadline", wait.Round(time.Millisecond)))
	}
	s := Step{Decision: Retry, Wait: wait}
	switch {
	case f.Invalid:
		s.Reason = "re-asked with the schema's problems"
	case f.RetryAfter > 0:
		s.Reason = "retry-after " + f.RetryAfter.String()
	}
	return s
}

// Leave is the step that leaves the target for reason: the next target,
// unless the decision table's next-target column stops the call.
func Leave(f Failure, l Limits, reason string) Step {
	s := Step{Decision: Next, Reason: reason,
		CloseGate: f.RetryAfter > l.Policy.MaxRetryAfter || l.HasDeadline && f.RetryAfter > l.Left}
	switch l.Table.Rule(f.Kind).Fallback {
	case retry.Stop:
		s.Decision, s.Reason = Stop, f.Kind.String()+" would fail on every target"
	case retry.IfAllowed:
		if !l.ContentFallback {
			s.Decision, s.Reason = Stop, "content-policy fallback is off (Builder.ContentFallback)"
		}
	}
	return s
}

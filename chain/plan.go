package chain

import (
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// failure is what plan needs to know of a failed attempt.
type failure struct {
	kind llm.Kind
	// n is the attempt that failed, from 1.
	n int
	// retryAfter is what the provider asked for (0: nothing);
	// shouldRetry its x-should-retry header (nil: absent).
	retryAfter  time.Duration
	shouldRetry *bool
	// invalid is true for an answer that failed its schema: it is re-asked
	// at once, with the problems.
	invalid bool
}

// limits is what plan needs to know of the target and the call.
type limits struct {
	// table is the target's decision table, policy its retry policy (with
	// defaults), backoff the wait the policy drew for this retry
	// (Retry-After as its floor).
	table   retry.Table
	policy  retry.Policy
	backoff time.Duration
	// left is the time until the deadline; hasDeadline is false when the
	// call has none.
	left        time.Duration
	hasDeadline bool
	// contentFallback is whether the chain lets a content refusal move on.
	contentFallback bool
	// elsewhere names the target's tier when a retry goes to another
	// target of it first (the tier spreads, and one is still to be tried
	// in this call); "" otherwise.
	elsewhere string
	// onward is true when a later target of the chain can take the call
	// now: a failure whose row says ElsewhereFirst moves on to it.
	onward bool
}

// step is what the walk does after a failed attempt.
type step struct {
	// decision is DecisionRetry (wait first), DecisionNext or
	// DecisionStop; reason says why, in words.
	decision Decision
	wait     time.Duration
	reason   string
	// closeGate is true when the target asked for a wait longer than calls
	// will wait (over MaxRetryAfter, or past this call's deadline): its
	// gate closes, so that concurrent calls skip it instead of each
	// rediscovering the 429. A Retry-After this call leaves for any other
	// reason (its attempts used, another target of a spreading tier, a
	// budget that refused the retry) closes nothing: other calls may still
	// wait it out, and one 429 among many successes must not shut the
	// target for every caller.
	closeGate bool
}

// plan decides what follows a failed attempt. It is a pure function of the
// failure and the limits: no clock, no randomness (the backoff is drawn by
// the caller), no I/O. A retry it grants may still be refused by the
// breaker or the budget, which the walk asks next.
func plan(f failure, l limits) step {
	if allowed := l.table.Attempts(f.kind, l.policy, f.shouldRetry); f.n >= allowed {
		if allowed <= 1 {
			return leave(f, l, f.kind.String()+" is not retried")
		}
		return leave(f, l, fmt.Sprintf("%d of %d attempts used", f.n, allowed))
	}
	if f.retryAfter > l.policy.MaxRetryAfter {
		return leave(f, l, fmt.Sprintf("retry-after %v exceeds MaxRetryAfter %v", f.retryAfter, l.policy.MaxRetryAfter))
	}
	if l.onward && l.table.Rule(f.kind).ElsewhereFirst {
		if s := leave(f, l, f.kind.String()+": another target is tried first"); s.decision == DecisionNext {
			return s
		}
	}
	if l.elsewhere != "" {
		// A retry goes to another target of the tier first, without a
		// wait (Retry-After speaks of this target alone), unless the
		// next-target column keeps the call here: then it retries here.
		if s := leave(f, l, "retried on another "+l.elsewhere+" target first"); s.decision == DecisionNext {
			return s
		}
	}
	wait := l.backoff
	if f.invalid {
		wait = 0
	}
	if l.hasDeadline && l.left < wait {
		return leave(f, l, fmt.Sprintf("a wait of %v would end past the deadline", wait.Round(time.Millisecond)))
	}
	s := step{decision: DecisionRetry, wait: wait}
	switch {
	case f.invalid:
		s.reason = "re-asked with the schema's problems"
	case f.retryAfter > 0:
		s.reason = "retry-after " + f.retryAfter.String()
	}
	return s
}

// leave is the step that leaves the target for reason: the next target,
// unless the decision table's next-target column stops the call.
func leave(f failure, l limits, reason string) step {
	s := step{decision: DecisionNext, reason: reason,
		closeGate: f.retryAfter > l.policy.MaxRetryAfter || l.hasDeadline && f.retryAfter > l.left}
	switch l.table.Rule(f.kind).Fallback {
	case retry.Stop:
		s.decision, s.reason = DecisionStop, f.kind.String()+" would fail on every target"
	case retry.IfAllowed:
		if !l.contentFallback {
			s.decision, s.reason = DecisionStop, "content-policy fallback is off (Builder.ContentFallback)"
		}
	}
	return s
}

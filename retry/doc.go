// Package retry owns how a chain retries one target: the Policy (attempts,
// exponential backoff with jitter, Retry-After honoured as a floor), the
// parsing of Retry-After headers, and the decision table that says, for each
// llm.Kind of failure, whether to retry the same target, whether the failure
// counts against the target's circuit breaker, and whether the chain moves
// on to the next target.
//
// The package decides; it never sleeps. The chain does the waiting, so that a
// wait can be cut short by the caller's context or skipped when it would end
// past the deadline.
package retry

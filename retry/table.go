package retry

import (
	"fmt"

	"github.com/backstop-llm/backstop/llm"
)

// BreakerVerdict is how a failure of some kind counts for the target's
// circuit breaker: the table's Breaker column.
type BreakerVerdict uint8

const (
	// NotFailure: the target answered as it should (a 429, a 400); the
	// breaker counts the call but not as a failure.
	NotFailure BreakerVerdict = iota
	// Failure counts against the target.
	Failure
	// Trip opens the breaker at once (a spend cap will not lift in 30s).
	Trip
	// Excluded is not counted at all: the caller gave up, the target did
	// nothing wrong or right.
	Excluded
)

var breakerVerdictNames = [...]string{NotFailure: "not_failure", Failure: "failure", Trip: "trip", Excluded: "excluded"}

// String returns the verdict's name.
func (v BreakerVerdict) String() string { return name(v, "BreakerVerdict", breakerVerdictNames[:]) }

// Fallback is whether the chain moves on to the next target after a target
// failed with some kind.
type Fallback uint8

const (
	// Next moves on to the next target.
	Next Fallback = iota
	// Stop ends the call with this error: the request is wrong everywhere,
	// or the caller gave up.
	Stop
	// LargerContext moves on only to targets whose ContextWindow is larger
	// than the failed target's.
	LargerContext
	// IfAllowed moves on only when the chain allows content-policy fallback.
	IfAllowed
)

var fallbackNames = [...]string{Next: "next", Stop: "stop", LargerContext: "larger_context", IfAllowed: "if_allowed"}

// String returns the fallback's name.
func (f Fallback) String() string { return name(f, "Fallback", fallbackNames[:]) }

// name returns names[v], or typ(v) for a value that has no name.
func name[T ~uint8](v T, typ string, names []string) string {
	if int(v) < len(names) {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, uint8(v))
}

// Rule is one row of the decision table.
type Rule struct {
	// Retry is whether the same target is tried again. An x-should-retry
	// response header overrides it for that attempt.
	Retry bool
	// ElsewhereFirst, with Retry, retries the same target only when no
	// later target of the chain can take the call: while one can (it
	// carries the request, its gate and breaker are open), the call moves
	// on to it instead. A timeout is the default row with it: a target
	// that went silent is likely to go silent again, and a retry would
	// multiply the wait where the next target may answer at once.
	ElsewhereFirst bool
	// Attempts caps the attempts on a target, the first included, while it
	// fails with this kind (LiteLLM's retry_policy). 0 means the Policy's
	// MaxAttempts; the Policy's MaxAttempts bounds it in any case.
	Attempts int
	// Breaker is how the failure counts for the target's circuit breaker.
	Breaker BreakerVerdict
	// Fallback is whether the chain moves on to the next target.
	Fallback Fallback
	// Verdict is what a service that called the chain answers its own
	// client when the call ended on this kind (chain.VerdictOf reads it).
	// Every row of DefaultTable has one; a call's error is mapped with
	// DefaultTable's, whichever target failed, so a Policy's Rules leave
	// it 0 (With keeps the replaced row's).
	Verdict Verdict
}

// Table is the decision table: one Rule per llm.Kind, indexed by Kind.
type Table [llm.NumKinds]Rule

// DefaultTable returns DESIGN.md's decision table:
//
//	Kind            retry        breaker      next target                     verdict
//	RateLimited     yes          not failure  yes                             retry later
//	Quota           never        trips        yes                             unavailable
//	Overloaded      yes          failure      yes                             retry later
//	Server          yes          failure      yes                             retry later
//	Timeout         only when no failure      yes, first                      retry later
//	                other target
//	                can take it
//	Connection      yes          failure      yes                             retry later
//	Conflict        yes          not failure  yes                             retry later
//	ContextLength   never        not failure  only to a larger ContextWindow  bad request
//	ContentFilter   never        not failure  only if the chain allows it     bad request
//	Auth, NotFound  never        failure      yes                             unavailable
//	BadRequest      never        not failure  no: fail fast                   bad request
//	InvalidOutput   once         not failure  yes                             retry later
//	Canceled        never        excluded     no: stop at once                canceled
//	Unknown         never        failure      yes                             retry later
func DefaultTable() Table {
	var t Table
	t[llm.KindUnknown] = Rule{Breaker: Failure, Verdict: VerdictRetryLater}
	t[llm.KindRateLimited] = Rule{Retry: true, Verdict: VerdictRetryLater}
	t[llm.KindQuota] = Rule{Breaker: Trip, Verdict: VerdictUnavailable}
	t[llm.KindOverloaded] = Rule{Retry: true, Breaker: Failure, Verdict: VerdictRetryLater}
	t[llm.KindServer] = Rule{Retry: true, Breaker: Failure, Verdict: VerdictRetryLater}
	t[llm.KindTimeout] = Rule{Retry: true, ElsewhereFirst: true, Breaker: Failure, Verdict: VerdictRetryLater}
	t[llm.KindConnection] = Rule{Retry: true, Breaker: Failure, Verdict: VerdictRetryLater}
	t[llm.KindConflict] = Rule{Retry: true, Verdict: VerdictRetryLater}
	t[llm.KindContextLength] = Rule{Fallback: LargerContext, Verdict: VerdictBadRequest}
	t[llm.KindContentFilter] = Rule{Fallback: IfAllowed, Verdict: VerdictBadRequest}
	t[llm.KindAuth] = Rule{Breaker: Failure, Verdict: VerdictUnavailable}
	t[llm.KindNotFound] = Rule{Breaker: Failure, Verdict: VerdictUnavailable}
	t[llm.KindBadRequest] = Rule{Fallback: Stop, Verdict: VerdictBadRequest}
	t[llm.KindInvalidOutput] = Rule{Retry: true, Attempts: 2, Verdict: VerdictRetryLater}
	t[llm.KindCanceled] = Rule{Breaker: Excluded, Fallback: Stop, Verdict: VerdictCanceled}
	return t
}

// Rule returns the row for k; an out-of-range kind gets KindUnknown's row.
func (t Table) Rule(k llm.Kind) Rule {
	if int(k) >= llm.NumKinds {
		k = llm.KindUnknown
	}
	return t[k]
}

// with returns a copy of t with the given rows replaced. A row whose
// Verdict is 0 keeps the Verdict of the row it replaces.
func (t Table) with(rows map[llm.Kind]Rule) Table {
	for k, r := range rows {
		if int(k) < llm.NumKinds {
			if r.Verdict == VerdictOK {
				r.Verdict = t[k].Verdict
			}
			t[k] = r
		}
	}
	return t
}

package retry

// Verdict is how a service that calls a chain should answer its own
// client when the call failed: "retry later", "bad request", "unavailable"
// or "canceled". It is the decision table's Verdict column, one per
// llm.Kind; chain.VerdictOf maps a call's error to one.
type Verdict uint8

// The verdicts.
const (
	// VerdictOK: no error. No row of DefaultTable has it: it is the zero
	// value, what a row left out would have.
	VerdictOK Verdict = iota
	// VerdictRetryLater: the failure is transient (rate limits, overloads,
	// server errors, timeouts, connections, open breakers, an exhausted
	// retry budget, a stream cut short, an answer that failed its schema):
	// the same request may well succeed later. HTTP 503 with Retry-After.
	VerdictRetryLater
	// VerdictBadRequest: the request itself is wrong everywhere (a bad
	// request, a prompt longer than every context window, a content
	// refusal, no messages). Retrying it will not help. HTTP 400.
	VerdictBadRequest
	// VerdictUnavailable: nothing can answer, and waiting will not change
	// it (every target failed on a spend cap, a key or a model that is
	// wrong): fix the configuration. HTTP 502.
	VerdictUnavailable
	// VerdictCanceled: the caller gave up (its context was canceled, or
	// it stopped reading a stream). HTTP 499, by the common convention.
	VerdictCanceled
	// VerdictOverBudget: the caller's money budget (package spend) cannot
	// cover the call until its period resets. HTTP 429, with Retry-After
	// at the reset (spend.ExceededError.Reset). No row of DefaultTable
	// has it: no provider's failure is the caller's budget.
	VerdictOverBudget
)

var verdictNames = [...]string{VerdictOK: "ok", VerdictRetryLater: "retry_later", VerdictBadRequest: "bad_request",
	VerdictUnavailable: "unavailable", VerdictCanceled: "canceled", VerdictOverBudget: "over_budget"}

// String returns the verdict's name: "ok", "retry_later", "bad_request",
// "unavailable", "canceled" or "over_budget".
func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown"
}

// HTTPStatus is the status a service would answer with: 200, 503, 400, 502,
// 499 or 429 (500 for a value that is no verdict).
func (v Verdict) HTTPStatus() int {
	switch v {
	case VerdictOK:
		return 200
	case VerdictRetryLater:
		return 503
	case VerdictBadRequest:
		return 400
	case VerdictUnavailable:
		return 502
	case VerdictCanceled:
		return 499
	case VerdictOverBudget:
		return 429
	}
	return 500
}

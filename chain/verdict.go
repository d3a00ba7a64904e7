package chain

import (
	"context"
	"errors"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/throttle"
)

// Verdict is how a service that calls a chain should answer its own
// client when the call failed: the one documented mapping from a chain's
// error to "retry later", "bad request" or "unavailable". Get it with
// VerdictOf.
type Verdict uint8

// The verdicts.
const (
	// VerdictOK: no error.
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
)

// String returns the verdict's name.
func (v Verdict) String() string {
	switch v {
	case VerdictOK:
		return "ok"
	case VerdictRetryLater:
		return "retry_later"
	case VerdictBadRequest:
		return "bad_request"
	case VerdictUnavailable:
		return "unavailable"
	case VerdictCanceled:
		return "canceled"
	}
	return "unknown"
}

// HTTPStatus is the status a service would answer with: 200, 503, 400, 502
// or 499.
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
	}
	return 500
}

// VerdictOf maps the error of Call, Stream or Decode to a Verdict. A call
// that exhausted the chain is VerdictRetryLater when any model target
// failed for a transient reason, VerdictUnavailable when every one failed
// on its configuration or its spend cap; a call the chain stopped takes
// the verdict of the kind that stopped it.
func VerdictOf(err error) Verdict {
	var ex *ExhaustedError
	switch {
	case err == nil:
		return VerdictOK
	case errors.Is(err, context.Canceled), errors.Is(err, ErrAbandoned):
		return VerdictCanceled
	case errors.Is(err, ErrNoMessages), errors.Is(err, ErrStreamConsumed):
		return VerdictBadRequest
	case errors.Is(err, ErrIncomplete):
		return VerdictRetryLater
	case errors.As(err, &ex):
		return ex.verdict()
	}
	return kindVerdict(llm.KindOf(err))
}

// verdict is an exhausted call's: retry later if any model target's
// failure was transient.
func (e *ExhaustedError) verdict() Verdict {
	v := VerdictUnavailable
	for _, c := range e.Causes {
		var te *TargetError
		if errors.As(c, &te) && te.Tier == TierDegrade {
			continue // a degradation's failure says nothing of the models
		}
		switch {
		case errors.Is(c, breaker.ErrOpen), errors.Is(c, breaker.ErrGateClosed), errors.Is(c, budget.ErrExhausted),
			errors.Is(c, throttle.ErrThrottled), errors.Is(c, ErrDeadline):
			return VerdictRetryLater
		}
		switch kindVerdict(llm.KindOf(c)) {
		case VerdictRetryLater:
			return VerdictRetryLater
		case VerdictBadRequest:
			v = VerdictBadRequest // a context too long for every window, say
		}
	}
	return v
}

// kindVerdicts is the verdict of each kind of failure: what an HTTP
// handler answers its own caller when the chain's last failure was of that
// kind. Every kind has an entry (a test holds it: VerdictOK, the zero
// value, is no failure's verdict), so a new kind cannot fall through to
// "retry later" unseen.
var kindVerdicts = [llm.NumKinds]Verdict{
	llm.KindUnknown:       VerdictRetryLater,
	llm.KindRateLimited:   VerdictRetryLater,
	llm.KindQuota:         VerdictUnavailable,
	llm.KindOverloaded:    VerdictRetryLater,
	llm.KindServer:        VerdictRetryLater,
	llm.KindTimeout:       VerdictRetryLater,
	llm.KindConnection:    VerdictRetryLater,
	llm.KindConflict:      VerdictRetryLater,
	llm.KindContextLength: VerdictBadRequest,
	llm.KindContentFilter: VerdictBadRequest,
	llm.KindAuth:          VerdictUnavailable,
	llm.KindNotFound:      VerdictUnavailable,
	llm.KindBadRequest:    VerdictBadRequest,
	llm.KindInvalidOutput: VerdictRetryLater,
	llm.KindCanceled:      VerdictCanceled,
}

// kindVerdict is the verdict of one failure's kind; a kind out of range
// (no llm.Kind constant) is KindUnknown's.
func kindVerdict(k llm.Kind) Verdict {
	if int(k) >= llm.NumKinds {
		k = llm.KindUnknown
	}
	return kindVerdicts[k]
}

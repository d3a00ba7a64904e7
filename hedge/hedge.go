// Package hedge owns hedged requests: when an attempt has not answered
// within a delay (a stream: not sent its first chunk), the chain sends the
// same request to the next target of the tier, the first acceptable answer
// wins, and the others are canceled at once (gRPC's hedging policy,
// failsafe-go's hedge policy). This package owns what configures it: the
// delay, fixed or read from the tier's recent answer times, and
// the hedge budget that keeps an outage from doubling the load.
//
// The chain runs the race (chain.Builder.Hedge, chain.Target.Hedge; its
// bookkeeping is the module's internal/race): no hedge goes to a target
// whose breaker is open, whose Retry-After gate is closed, or past the
// call's deadline; a hedge's loser is recorded as lost, its breaker told
// neither of a failure nor of a success.
package hedge

import (
	"math"
	"time"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/internal/problems"
)

// Defaults of Config's zero fields, once hedging is on: the share of the
// tier's recent answers an attempt may take longer than before an
// adaptive delay hedges it, and the floor of an adaptive delay.
const (
	defaultQuantile = latency.DefaultQuantile
	defaultMinDelay = latency.DefaultMinDelay
)

var errHead = problems.Head("hedge: invalid configuration")

// Config configures hedging. The zero value is off; a Delay or Adaptive
// turns it on.
type Config struct {
	// Delay is how long an attempt may go without answering (a stream:
	// without its first chunk) before the same request goes to the next
	// target of its tier. With Adaptive it is the floor of the delay read
	// from the tier (0 means 50ms).
	Delay time.Duration
	// Adaptive reads the delay from the tier's recent answer times: their
	// Quantile, at least Delay. Until the tier has answered 20 times no
	// hedge is sent; the quantile is of its latest 512 answer times.
	Adaptive bool
	// Quantile is the adaptive delay's quantile of the tier's answer
	// times, in (0, 1). 0 means 0.95: about one attempt
	// in twenty of a healthy tier is hedged, the budget capping the rest.
	Quantile float64
	// Budget is asked before every hedge (Withdraw) and told of every call
	// the hedged targets take (Record), so that hedges stay a share of the
	// calls: an outage that slows every attempt does not double the load.
	// Nil means a ratio budget of 10% of the calls (over 10s,
	// at least 10 per window); with chain.Builder.Shared, one shared by the
	// replicas. budget.Unlimited() hedges every attempt that waits longer
	// than the delay.
	Budget budget.Budget
}

// On reports whether c turns hedging on.
func (c Config) On() bool { return c.Delay > 0 || c.Adaptive }

// Validate reports every problem with c at once, each wrapping
// llm.ErrInvalidConfig.
func (c Config) Validate() error {
	found := problems.New(errHead)
	problems.NotNegative(found, "Delay", c.Delay, defaultMinDelay.String()+" with Adaptive, off without it")
	if math.IsNaN(c.Quantile) || c.Quantile < 0 || c.Quantile >= 1 {
		found.Addf("Quantile is %v; use a share in (0, 1), or 0 for %v", c.Quantile, defaultQuantile)
	}
	if c.Quantile != 0 && !c.Adaptive {
		found.Addf("Quantile is set but Adaptive is not; set Adaptive to read the delay from the tier's answer times")
	}
	return found.Err()
}

// Package hedge owns hedged requests: when an attempt has not answered
// within a delay (a stream: not sent its first chunk), the chain sends the
// same request to the next target of the tier, the first acceptable answer
// wins, and the others are canceled at once (gRPC's hedging policy,
// failsafe-go's hedge policy). This package owns what configures it: the
// delay, fixed or read from the tier's recent answer times (Window), and
// the hedge budget that keeps an outage from doubling the load.
//
// The chain runs the race (chain.Builder.Hedge, chain.Target.Hedge; its
// bookkeeping is the module's internal/race): no hedge goes to a target
// whose breaker is open, whose Retry-After gate is closed, or past the
// call's deadline; a hedge's loser is recorded as lost, its breaker told
// neither of a failure nor of a success.
package hedge

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/internal/problems"
)

// Defaults of Config's zero fields, once hedging is on.
const (
	// defaultQuantile is the share of the tier's recent answers an
	// attempt may take longer than before an adaptive delay hedges it.
	defaultQuantile = 0.95
	// defaultMinDelay floors an adaptive delay.
	defaultMinDelay = 50 * time.Millisecond
	// DefaultRatio is the hedge budget: hedges at most 10% of the calls
	// in a window (budget.RatioConfig's window, 10s), with its floor of 10
	// per window.
	DefaultRatio = 0.1
	// MinSamples is how many answers the tier must have given before an
	// adaptive delay hedges: until then no hedge is sent.
	MinSamples = 20
	// WindowSize is how many recent answer times a Window keeps.
	WindowSize = 512
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
	// Quantile, at least Delay. Until the tier has answered MinSamples
	// times no hedge is sent.
	Adaptive bool
	// Quantile is the adaptive delay's quantile of the tier's answer
	// times, in (0, 1). 0 means 0.95: about one attempt
	// in twenty of a healthy tier is hedged, the budget capping the rest.
	Quantile float64
	// Budget is asked before every hedge (Withdraw) and told of every call
	// the hedged targets take (Record), so that hedges stay a share of the
	// calls: an outage that slows every attempt does not double the load.
	// Nil means a ratio budget of DefaultRatio (10% of the calls over 10s,
	// at least 10 per window); with chain.Builder.Shared, one shared by the
	// replicas. budget.Unlimited() hedges every attempt that waits longer
	// than the delay.
	Budget budget.Budget
}

// On reports whether c turns hedging on.
func (c Config) On() bool { return c.Delay > 0 || c.Adaptive }

// withDefaults returns c with every zero field set to its default (the
// Budget excepted: the chain makes one per tier).
func (c Config) WithDefaults() Config {
	if c.Adaptive && c.Delay == 0 {
		c.Delay = defaultMinDelay
	}
	c.Quantile = cmp.Or(c.Quantile, defaultQuantile)
	return c
}

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

// DelayFrom returns the delay before a hedge: Delay itself, or with Adaptive
// w's Quantile (at least Delay). ok is false while an adaptive delay has
// too few samples to go by: send no hedge then. c must have its defaults.
func (c Config) DelayFrom(w *Window) (d time.Duration, ok bool) {
	if !c.Adaptive {
		return c.Delay, c.Delay > 0
	}
	q, ok := w.Quantile(c.Quantile)
	if !ok {
		return 0, false
	}
	return max(q, c.Delay), true
}

// Window keeps a tier's latest answer times (the WindowSize most recent)
// for an adaptive delay. It is safe for concurrent use; the zero value is
// ready.
type Window struct {
	mu     sync.Mutex
	ring   [WindowSize]time.Duration
	n      int // samples held, up to WindowSize
	next   int // where the next sample goes
	fresh  int // samples added since the quantile was computed
	q      float64
	cached time.Duration
	sorted []time.Duration // scratch for the quantile
}

// refresh is how many samples may arrive before a quantile is computed
// again: a quantile of 512 samples moves little in 32 of them, and the
// sort it takes is then paid once per 32 answers.
const refresh = 32

// Add records one answer time.
func (w *Window) Add(d time.Duration) {
	w.mu.Lock()
	w.ring[w.next] = d
	w.next = (w.next + 1) % WindowSize
	w.n = min(w.n+1, WindowSize)
	w.fresh++
	w.mu.Unlock()
}

// Len returns how many answer times w holds.
func (w *Window) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Quantile returns the q quantile of the answer times held (the nearest
// rank); ok is false while w holds fewer than MinSamples.
func (w *Window) Quantile(q float64) (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n < MinSamples {
		return 0, false
	}
	if w.q == q && w.fresh < refresh && w.cached > 0 {
		return w.cached, true
	}
	w.sorted = append(w.sorted[:0], w.ring[:w.n]...)
	slices.SortFunc(w.sorted, cmp.Compare[time.Duration])
	i := int(math.Ceil(q*float64(w.n))) - 1
	w.cached = w.sorted[min(max(i, 0), w.n-1)]
	w.q, w.fresh = q, 0
	return w.cached, true
}

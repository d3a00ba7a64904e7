// Package latency keeps a tier's recent answer times and reads an adaptive
// hedge delay from them (hedge.Config's Adaptive): the chain's plumbing for
// package hedge.
package latency

import (
	"cmp"
	"math"
	"slices"
	"sync"
	"time"
)

const (
	// DefaultQuantile is the share of the tier's recent answers an
	// attempt may take longer than before an adaptive delay hedges it.
	DefaultQuantile = 0.95
	// DefaultMinDelay floors an adaptive delay.
	DefaultMinDelay = 50 * time.Millisecond
	// MinSamples is how many answers the tier must have given before an
	// adaptive delay hedges: until then no hedge is sent.
	MinSamples = 20
	// WindowSize is how many recent answer times a Window keeps.
	WindowSize = 512
)

// Delay returns the delay before a hedge of hedge.Config's Delay,
// Adaptive and Quantile: delay itself, or with adaptive w's quantile q (at
// least delay), their zero values meaning DefaultMinDelay and
// DefaultQuantile. ok is false while an adaptive delay has too few
// samples to go by: send no hedge then.
func Delay(delay time.Duration, adaptive bool, q float64, w *Window) (d time.Duration, ok bool) {
	if !adaptive {
		return delay, delay > 0
	}
	d, ok = w.Quantile(cmp.Or(q, DefaultQuantile))
	if !ok {
		return 0, false
	}
	return max(d, cmp.Or(delay, DefaultMinDelay)), true
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

// HedgeRatio is the default hedge budget: hedges at most 10% of the calls
// in a window (budget.RatioConfig's window, 10s), with its floor of 10 per
// window (hedge.Config.Budget's documented default).
const HedgeRatio = 0.1

package throttle

import (
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// Figures and accessors of the package that its external tests read; they
// are not part of the API.
const (
	AdaptiveK       = adaptiveK
	AdaptiveWindow  = adaptiveWindow
	DefaultBackoff  = defaultBackoff
	DefaultRecovery = defaultRecovery
	MaxPerMinute    = maxPerMinute
	MinFactor       = minFactor
)

func (l *Limiter) Factor() float64 { return l.currentFactor() }

// The slot-level API the policy (Admit, Settle) is built on, for the
// external tests; not part of the API.
type Reservation = reservation

func (l *Limiter) Reserve(now time.Time, tokens int, limit time.Duration) (time.Duration, Reservation, bool) {
	return l.reserve(now, tokens, limit)
}
func (r reservation) Stale() <-chan struct{} { return r.stale() }
func (r reservation) Cancel(now time.Time)   { r.release(now) }
func (l *Limiter) Observe(now time.Time, rl llm.RateLimit, throttled bool) {
	l.observe(now, rl, throttled)
}
func (l *Limiter) MaxWait() time.Duration { return l.s.MaxWait }
func (l *Limiter) Paces() bool            { return l.paces() }

var EstimateTokens = estimateTokens

package throttle

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

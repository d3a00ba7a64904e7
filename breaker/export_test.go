package breaker

import "time"

// Hooks into the protocol Shared runs internally (Sync, Publish), for the
// tests of package breaker_test.

// OpenElsewhereForTest is what Sync applies to b for a publication read
// until until, with s's Slack.
func (s *Shared) OpenElsewhereForTest(b *Breaker, until time.Time, asOf uint64) {
	b.openElsewhere(until, asOf, s.slackBound())
}

// CloseElsewhereForTest is what Sync applies to g for a closure read until
// until, capped by limit, with s's Slack.
func (s *Shared) CloseElsewhereForTest(g *Gate, until time.Time, limit time.Duration) {
	g.closeUntilElsewhere(until, limit, s.slackBound())
}

// ChangesForTest is how many state changes b has made, as Sync reads it
// before its Load.
func ChangesForTest(b *Breaker) uint64 { return b.changes.Load() }

// TakeChangeForTest is what Publish takes from b.
func TakeChangeForTest(b *Breaker) (State, bool) { return b.takeChange() }

// NoJitterForTest makes b's openings, once b is tracked, last exactly
// their interval, as an untracked breaker's do: for the tests of the
// publication's arithmetic.
func NoJitterForTest(b *Breaker) { b.jitter.Store(false) }

// Figures and accessors of the package that its external tests read;
// they are not part of the API.
const (
	DefaultFirstOpenFor = defaultFirstOpenFor
	DefaultMaxGate      = defaultMaxGate
	DefaultOpenFor      = defaultOpenFor
	DefaultProbeEvery   = defaultProbeEvery
	DefaultWindow       = defaultWindow
	MaxBuckets          = maxBuckets
	MaxProbeWait        = maxProbeWait
	RampStep            = rampStep
)

func (b *Breaker) MaxOpenFor() time.Duration   { return b.maxOpenFor() }
func (g *Gate) ClosedUntil() (time.Time, bool) { return g.closedUntil() }
func (s *Shared) SlackBound() time.Duration    { return s.slackBound() }

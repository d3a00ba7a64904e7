package breaker

import (
	"context"
	"time"
)

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

// The breaker's ticket-level methods, which the policy seam (Admit,
// Settle) and Shared's own poller use, for the tests that drive them
// directly.

type Ticket = ticket

func (b *Breaker) Allow() (Ticket, error)                   { return b.allowNow() }
func (b *Breaker) AllowAt(now time.Time) (Ticket, error)    { return b.allowAt(now) }
func (b *Breaker) ProbeAt() time.Time                       { return b.probeAt() }
func (b *Breaker) Closed() bool                             { return b.isClosed() }
func (b *Breaker) Refusal() error                           { return b.refusalNow() }
func (b *Breaker) OpenInterval() time.Duration              { return b.openInterval() }
func (b *Breaker) Wait(ctx context.Context) (Ticket, error) { return b.wait(ctx) }
func (s *Shared) Sync(ctx context.Context) error            { return s.syncOnce(ctx) }
func (s *Shared) Poll(ctx context.Context) error            { return s.pollOnce(ctx) }
func (s *Shared) Publish(ctx context.Context, b *Breaker) error {
	return s.publish(ctx, b)
}
func (s *Shared) PublishLater(b *Breaker) bool { return s.publishLater(b) }

// Refusal is what the gate's Admit reads: while g is closed, until when
// and why (ErrGateClosed, ErrGateClosedElsewhere); a nil error while open.
func (g *Gate) Refusal() (time.Time, error) { return g.refused() }

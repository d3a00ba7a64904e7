package breaker

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

var (
	// ErrGateClosed is the reason a target is skipped while a Retry-After
	// it answered has not yet passed.
	ErrGateClosed = errors.New("closed by the provider's Retry-After")
	// ErrGateClosedElsewhere is the reason a target is skipped while a
	// Retry-After another replica received has not yet passed (see
	// Shared.Sync). It matches ErrGateClosed too.
	ErrGateClosedElsewhere = fmt.Errorf("%w (received by another replica)", ErrGateClosed)
)

// Gate closes a target until a time its provider named, so that concurrent
// calls skip it without sending a request; it reopens by itself when the
// time passes. The zero Gate is open. It is safe for concurrent use, reads
// no clock while it has never been closed, and compares times on the
// monotonic clock, so a step of the wall clock neither stretches nor cuts a
// closure.
type Gate struct {
	until atomic.Pointer[closure] // nil when open
	// seen is the end of the last closure another replica published, as
	// read (see closeUntilElsewhere); nil before the first.
	seen atomic.Pointer[time.Time]
}

// closure is when a gate reopens, and whether another replica closed it.
type closure struct {
	until     time.Time
	elsewhere bool
}

// CloseUntil closes the gate until t, which should come from time.Now (so
// that it carries a monotonic reading). A gate already closed until later
// stays closed until then.
func (g *Gate) CloseUntil(t time.Time) { g.close(closure{until: t}) }

// closeUntilElsewhere applies to g, for Shared.Sync, a closure another
// replica published: its provider asked for no request until until, as
// this replica estimates it (when the read returned, from time.Now, plus
// the time the store says is left). refused tells it apart from a closure
// of this replica's own (ErrGateClosedElsewhere).
//
// What another replica asked for is capped by this replica's own limit
// (its MaxGate; 0 or less means 15m), measured from when this
// replica first read the publication: the gate closes until the earlier of
// until and now + limit. The same publication read again does not close it
// again: a reading whose until is within slack (Shared.slackBound) of the last
// publication applied is that publication. A reading whose end differs by
// more is a new closure (a new 429): it is applied afresh, capped again. A
// gate already closed until later stays closed until then.
func (g *Gate) closeUntilElsewhere(until time.Time, limit, slack time.Duration) {
	if s := g.seen.Load(); s != nil && within(until, *s, slack) {
		return // read before: applied already
	}
	read := until
	g.seen.Store(&read)
	if limit <= 0 {
		limit = defaultMaxGate
	}
	if now := time.Now(); until.Sub(now) > limit {
		until = now.Add(limit)
	}
	g.close(closure{until: until, elsewhere: true})
}

// within reports whether a and b are at most slack apart.
func within(a, b time.Time, slack time.Duration) bool {
	d := a.Sub(b)
	return -slack <= d && d <= slack
}

func (g *Gate) close(c closure) {
	for {
		cur := g.until.Load()
		if cur != nil && !cur.until.Before(c.until) || g.until.CompareAndSwap(cur, &c) {
			return
		}
	}
}

// closedUntil reports whether the gate is closed now, and until when. It
// reads the clock only while the gate is closed.
func (g *Gate) closedUntil() (time.Time, bool) {
	until, err := g.refused()
	return until, err != nil
}

// refused returns, while the gate is closed, until when and why:
// ErrGateClosed, or ErrGateClosedElsewhere when the closure that ends last
// came from another replica. It returns a nil error while the gate is
// open, and reads the clock only while it is closed.
func (g *Gate) refused() (time.Time, error) {
	c := g.until.Load()
	if c == nil {
		return time.Time{}, nil // open: the path every call takes
	}
	return g.refusal(c)
}

// refusal is refused for a gate closed until c (or that was).
func (g *Gate) refusal(c *closure) (time.Time, error) {
	if !time.Now().Before(c.until) {
		g.until.CompareAndSwap(c, nil) // passed: reopen, and skip the clock next time
		return time.Time{}, nil
	}
	if c.elsewhere {
		return c.until, ErrGateClosedElsewhere
	}
	return c.until, ErrGateClosed
}

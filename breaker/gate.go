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
	// Gate.CloseUntilElsewhere). It matches ErrGateClosed too.
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

// CloseUntilElsewhere is CloseUntil for a Retry-After another replica
// received (see Shared): the same closure, told apart in Refusal.
func (g *Gate) CloseUntilElsewhere(t time.Time) { g.close(closure{until: t, elsewhere: true}) }

func (g *Gate) close(c closure) {
	for {
		cur := g.until.Load()
		if cur != nil && !cur.until.Before(c.until) || g.until.CompareAndSwap(cur, &c) {
			return
		}
	}
}

// ClosedUntil reports whether the gate is closed now, and until when. It
// reads the clock only while the gate is closed.
func (g *Gate) ClosedUntil() (time.Time, bool) {
	until, err := g.Refusal()
	return until, err != nil
}

// Refusal returns, while the gate is closed, until when and why:
// ErrGateClosed, or ErrGateClosedElsewhere when the closure that ends last
// came from another replica. It returns a nil error while the gate is
// open, and reads the clock only while it is closed.
func (g *Gate) Refusal() (time.Time, error) {
	c := g.until.Load()
	if c == nil {
		return time.Time{}, nil
	}
	if !time.Now().Before(c.until) {
		g.until.CompareAndSwap(c, nil) // passed: reopen, and skip the clock next time
		return time.Time{}, nil
	}
	if c.elsewhere {
		return c.until, ErrGateClosedElsewhere
	}
	return c.until, ErrGateClosed
}

package breaker

import (
	"errors"
	"sync/atomic"
	"time"
)

// ErrGateClosed is the reason a target is skipped while a Retry-After it
// answered has not yet passed.
var ErrGateClosed = errors.New("closed by the provider's Retry-After")

// Gate closes a target until a time its provider named, so that concurrent
// calls skip it without sending a request; it reopens by itself when the
// time passes. The zero Gate is open. It is safe for concurrent use, reads
// no clock while it has never been closed, and compares times on the
// monotonic clock, so a step of the wall clock neither stretches nor cuts a
// closure.
type Gate struct {
	until atomic.Pointer[time.Time] // nil when open
}

// CloseUntil closes the gate until t, which should come from time.Now (so
// that it carries a monotonic reading). A gate already closed until later
// stays closed until then.
func (g *Gate) CloseUntil(t time.Time) {
	for {
		cur := g.until.Load()
		if cur != nil && !cur.Before(t) || g.until.CompareAndSwap(cur, &t) {
			return
		}
	}
}

// ClosedUntil reports whether the gate is closed now, and until when. It
// reads the clock only while the gate is closed.
func (g *Gate) ClosedUntil() (time.Time, bool) {
	u := g.until.Load()
	if u == nil {
		return time.Time{}, false
	}
	if !time.Now().Before(*u) {
		g.until.CompareAndSwap(u, nil) // passed: reopen, and skip the clock next time
		return time.Time{}, false
	}
	return *u, true
}

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
// time passes. The zero Gate is open. It is safe for concurrent use and
// reads no clock while it has never been closed.
type Gate struct {
	until atomic.Int64 // Unix nanoseconds; 0 when open
}

// CloseUntil closes the gate until t. A gate already closed until later
// stays closed until then.
func (g *Gate) CloseUntil(t time.Time) {
	n := t.UnixNano()
	for {
		cur := g.until.Load()
		if cur >= n || g.until.CompareAndSwap(cur, n) {
			return
		}
	}
}

// ClosedUntil reports whether the gate is closed now, and until when. It
// reads the clock only while the gate is closed.
func (g *Gate) ClosedUntil() (time.Time, bool) {
	u := g.until.Load()
	if u == 0 {
		return time.Time{}, false
	}
	if time.Now().UnixNano() >= u {
		g.until.CompareAndSwap(u, 0) // passed: reopen, and skip the clock next time
		return time.Time{}, false
	}
	return time.Unix(0, u), true
}

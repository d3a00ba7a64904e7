// Package pause owns the one wait the module's loops make that a context
// cuts short: a chain's backoff before a retry, an agent's poll for a
// duplicate's result.
package pause

import (
	"context"
	"time"
)

// For waits d or until ctx ends, whichever is first, and returns ctx's
// error when ctx ended first (or had ended: a d of 0 or less waits
// nothing and reports ctx's state).
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

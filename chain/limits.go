package chain

// Time limits: how long an attempt may take before it is ended
// (KindTimeout): Timeout (10 minutes when 0) on a whole answer or, for
// a stream, on the wait for its first chunk; FirstChunkTimeout;
// IdleTimeout (a minute when 0) between two chunks of a stream.
// A timed-out target is left for the next target that can take the call,
// and retried only when none can (retry.Rule.ElsewhereFirst). A slow
// attempt is raced before its limit (patience.go).

import (
	"context"
	"time"
)

// The default time limits (see Target's Timeout and IdleTimeout).
// docs/concepts.md gives each its reason and the figure that chose it.
const (
	// defaultTimeout bounds an attempt of a target whose Timeout is 0: a
	// whole answer, or a stream until its first chunk (a stream that has
	// begun is bounded by IdleTimeout between chunks instead, so that a
	// long answer is never cut for being long). Ten minutes: longer than
	// any single answer a chat service waits for, short enough that a
	// request the provider lost does not hold a call for good.
	defaultTimeout = 10 * time.Minute
	// defaultIdleTimeout bounds the gap between two chunks of a stream
	// when IdleTimeout is 0. A minute: models pause for seconds between
	// chunks while they think or call tools, never for a minute on a
	// healthy connection; a stream stalled 30 s still completes.
	defaultIdleTimeout = time.Minute
)

// hardLimit is how long an attempt of t may take before it is ended: a
// whole answer's, or (stream) the time until its first chunk, which the
// stream's own timer bounds (so 0 is returned for the attempt as a
// whole, unless Timeout is set: it then bounds the whole stream, as it
// always has).
func (t *target) hardLimit(stream bool) time.Duration {
	if t.Timeout > 0 {
		return t.Timeout
	}
	if stream {
		return 0
	}
	return defaultTimeout
}

// firstChunkLimit is the hard limit on a stream's wait for its first
// chunk: FirstChunkTimeout, or defaultTimeout when neither it nor Timeout
// is set.
func (t *target) firstChunkLimit() time.Duration {
	switch {
	case t.FirstChunkTimeout > 0:
		return t.FirstChunkTimeout
	case t.Timeout > 0:
		return 0 // Timeout bounds the whole stream
	}
	return defaultTimeout
}

// idleLimit is the hard limit on the gap between two chunks.
func (t *target) idleLimit() time.Duration {
	if t.IdleTimeout > 0 {
		return t.IdleTimeout
	}
	return defaultIdleTimeout
}

// bounds reports whether attempt limit must bound an attempt of t under
// ctx, starting at now on the chain's clock: a Timeout set always does;
// the default only when the call's deadline (if any) is further away,
// sparing the healthy path a timer that could never fire first.
func (w *walk) bounds(ctx context.Context, t *target, limit, now time.Duration) bool {
	if t.Timeout > 0 {
		return true
	}
	dl, ok := ctx.Deadline()
	return !ok || dl.Sub(w.c.epoch.Add(now)) > limit
}

// Package remote owns what the Redis-backed stores of this module have in
// common: the check that a go-redis client bounds its commands by their
// context, and Health, which tracks whether Redis answers, leaves it alone
// for a while after a failure and says so (a log record and a callback) at
// each change.
package remote

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// CheckClient describes what is wrong with client for a store whose round
// trips must be bounded by their context's deadline, or returns "". what
// names the store's bound in the description, such as "the budget's
// Timeout". Clients other than *redis.Client, *redis.ClusterClient and
// *redis.Ring cannot be checked and pass.
func CheckClient(client redis.UniversalClient, what string) string {
	var enabled bool
	switch c := client.(type) {
	case nil:
		return "client is nil; pass a go-redis client such as redis.NewClient(&redis.Options{Addr: ..., ContextTimeoutEnabled: true})"
	case *redis.Client:
		if c == nil {
			return "client is a nil *redis.Client"
		}
		enabled = c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		if c == nil {
			return "client is a nil *redis.ClusterClient"
		}
		enabled = c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		if c == nil {
			return "client is a nil *redis.Ring"
		}
		enabled = c.Options().ContextTimeoutEnabled
	default:
		return ""
	}
	if !enabled {
		return "client: ContextTimeoutEnabled is false; set ContextTimeoutEnabled: true in its options, or a slow Redis would hold a call for the client's ReadTimeout instead of " + what
	}
	return ""
}

// Health tracks whether a store's Redis answers. While it does, every
// round trip is tried; after a failure, none is tried for ProbeEvery, then
// one caller (the probe) tries again, and so on until one succeeds. It is
// safe for concurrent use, reads no clock of its own and does not allocate.
// Build one with NewHealth.
type Health struct {
	what, key  string // "shared budget", and the store's key, for the log
	probeEvery int64  // nanoseconds
	onError    func(error)
	logger     *slog.Logger

	// downUntil is 0 while Redis answers; after a failure, the time (on
	// the caller's clock) until which no round trip is tried, at least 1.
	downUntil atomic.Int64
}

// NewHealth returns a Health for the store named what ("shared budget")
// under key. onError, when not nil, is called with the error each time
// Redis becomes unavailable and with nil each time it answers again;
// logger (slog.Default() when nil) gets a Warn record "backstop: <what>
// unavailable, using local state" and an Info record "backstop: <what>
// available again, using shared state" at the same moments.
func NewHealth(what, key string, probeEvery time.Duration, onError func(error), logger *slog.Logger) *Health {
	return &Health{what: what, key: key, probeEvery: int64(probeEvery), onError: onError, logger: logger}
}

// Use reports whether a round trip may be tried at now (nanoseconds on the
// caller's clock, which must not go backwards): always while Redis answers;
// after a failure, once ProbeEvery has passed, by one caller only (probe),
// which moves the next try ProbeEvery further.
func (h *Health) Use(now int64) (use, probe bool) {
	d := h.downUntil.Load()
	if d == 0 {
		return true, false
	}
	if now < d || !h.downUntil.CompareAndSwap(d, max(now+h.probeEvery, 1)) {
		return false, false
	}
	return true, true
}

// Down reports whether, at now, round trips are being left alone.
func (h *Health) Down(now int64) bool {
	d := h.downUntil.Load()
	return d != 0 && now < d
}

// Available reports whether Redis answered the last round trip.
func (h *Health) Available() bool { return h.downUntil.Load() == 0 }

// Failed records a failed round trip at now: no other is tried for
// ProbeEvery. If Redis was available until now, it logs and calls onError.
func (h *Health) Failed(now int64, err error) {
	if h.downUntil.Swap(max(now+h.probeEvery, 1)) != 0 {
		return // already unavailable: no new transition
	}
	h.log().Warn("backstop: "+h.what+" unavailable, using local state",
		"key", h.key, "error", err, "retry_in", time.Duration(h.probeEvery))
	if h.onError != nil {
		h.onError(err)
	}
}

// Succeeded records a round trip Redis answered. If it was unavailable
// until now, it logs and calls onError with nil.
func (h *Health) Succeeded() {
	if h.downUntil.Load() == 0 || h.downUntil.Swap(0) == 0 {
		return
	}
	h.log().Info("backstop: "+h.what+" available again, using shared state", "key", h.key)
	if h.onError != nil {
		h.onError(nil)
	}
}

func (h *Health) log() *slog.Logger {
	if h.logger != nil {
		return h.logger
	}
	return slog.Default()
}

// ProbeEvery returns how long Redis is left alone after a failure.
func (h *Health) ProbeEvery() time.Duration { return time.Duration(h.probeEvery) }

// TimedOut reports whether a round trip bounded by tctx failed for want of
// an answer in time: tctx has ended, or err is a network timeout (go-redis
// sets the connection's deadline from tctx's, so the read may time out
// just before tctx's own timer fires).
func TimedOut(tctx context.Context, err error) bool {
	if tctx.Err() != nil {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Blame says who ended a round trip that failed with err under tctx (ctx
// with the store's Timeout); call it before canceling tctx. callerErr is
// not nil when the caller did: ctx has ended, or ctx's own deadline, no
// later than the Timeout's, was tctx's and the round trip timed out (the
// network read may fire just before ctx reports its deadline); such a
// failure says nothing about Redis. Otherwise timedOut says whether Redis
// did not answer within the Timeout.
func Blame(ctx, tctx context.Context, err error) (callerErr error, timedOut bool) {
	timedOut = TimedOut(tctx, err)
	if cerr := ctx.Err(); cerr != nil {
		return cerr, false
	}
	if cd, ok := ctx.Deadline(); ok && timedOut {
		if td, _ := tctx.Deadline(); !td.Before(cd) {
			return context.DeadlineExceeded, false
		}
	}
	return nil, timedOut
}

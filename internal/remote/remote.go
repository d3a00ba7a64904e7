// Package remote owns what the shared stores of this module have in
// common, whatever their client: Health, which tracks whether Redis
// answers, leaves it alone for a while after a failure and says so (a log
// record and a callback) at each change, and Blame, which tells a round
// trip that Redis did not answer in time from one the caller's own context
// ended. It imports no Redis client: the go-redis code is redisstore's.
package remote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"
)

// Health tracks whether a store's Redis answers. While it does, every
// round trip is tried; after a failure, none is tried for ProbeEvery, then
// one caller (the probe) tries again, and so on until one succeeds. It is
// safe for concurrent use, reads no clock of its own and does not allocate.
// Build one with NewHealth.
type Health struct {
	what, key  string // "shared budget", and the store's key, for the log
	down, up   string // how the store carries on, for the log
	probeEvery int64  // nanoseconds
	onError    func(error)
	logger     *slog.Logger

	// downUntil is 0 while Redis answers; after a failure, the time (on
	// the caller's clock) until which no round trip is tried, at least 1.
	downUntil atomic.Int64
	// reported is when (on the caller's clock, +1) a failure was last
	// logged while Redis was already unavailable; 0 for never.
	reported atomic.Int64
}

// NewHealth returns a Health for the store named what ("shared budget")
// under key. onError, when not nil, is called with the error each time
// Redis becomes unavailable and with nil each time it answers again;
// logger (slog.Default() when nil) gets a Warn record "backstop: <what>
// unavailable, using local state" and an Info record "backstop: <what>
// available again, using shared state" at the same moments (see Saying for
// other words). While Redis stays unavailable, a failed round trip that
// Redis answered with an error (an error reply, such as WRONGTYPE or
// NOPERM: something waiting does not mend) is logged again, at most once
// per probeEvery, so that it is never reported only once.
func NewHealth(what, key string, probeEvery time.Duration, onError func(error), logger *slog.Logger) *Health {
	return &Health{what: what, key: key, down: "using local state", up: "using shared state",
		probeEvery: int64(probeEvery), onError: onError, logger: logger}
}

// Saying replaces how the log records say the store carries on, after
// "unavailable, " and "available again, ": "using local state" and "using
// shared state" by default. Call it before h is used; it returns h.
func (h *Health) Saying(down, up string) *Health {
	h.down, h.up = down, up
	return h
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
// If it was not, and Redis answered err (an error reply), it logs again,
// at most once per ProbeEvery: a probe that finds the same error reply.
func (h *Health) Failed(now int64, err error) {
	if h.downUntil.Swap(max(now+h.probeEvery, 1)) != 0 {
		if last := h.reported.Load(); IsReply(err) && (last == 0 || now+1-last >= h.probeEvery) &&
			h.reported.CompareAndSwap(last, now+1) {
			h.log().Warn("backstop: "+h.what+" still unavailable, Redis answers with an error",
				"key", h.key, "error", err, "retry_in", time.Duration(h.probeEvery))
		}
		return // already unavailable: no new transition
	}
	h.reported.Store(now + 1)
	h.log().Warn("backstop: "+h.what+" unavailable, "+h.down,
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
	h.log().Info("backstop: "+h.what+" available again, "+h.up, "key", h.key)
	if h.onError != nil {
		h.onError(nil)
	}
}

// Repaired logs, as a Warn record, that the store's script found a value
// of type found (Redis's TYPE, such as "string") under its key, where it
// keeps a hash, and deleted it so that the store works again. The key is
// the store's: whatever else wrote there (a person, another program, a
// key name shared by mistake) is told on every repair, not once.
func (h *Health) Repaired(found string) {
	h.log().Warn("backstop: "+h.what+": the key held a "+found+", not the hash backstop keeps there; deleted it and carried on (give other data another key)",
		"key", h.key, "type", found)
}

// IsReply reports whether err is, or wraps, an error reply from Redis
// (WRONGTYPE, NOPERM, LOADING, an error raised by a script), rather than a
// timeout, a refused connection or a caller's context: an error with a
// RedisError method, as go-redis's replies (its redis.Error) have.
func IsReply(err error) bool {
	var reply interface {
		error
		RedisError()
	}
	return errors.As(err, &reply)
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

// Late is err, the failure of a round trip that Redis did not answer
// within the store's Timeout (Blame's timedOut), as one that matches
// context.DeadlineExceeded, whatever the client reported: go-redis sets
// its read deadline from the context's, and may report that deadline as
// a network timeout ("i/o timeout") just before the context reports its
// own, so that the same timeout would match DeadlineExceeded one time in
// many and not the others.
func Late(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
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

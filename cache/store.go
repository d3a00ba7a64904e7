package cache

import (
	"context"
	"errors"
	"time"
)

// Store keeps last-known-good answers, each under a key and for a limited
// time. Implementations must be safe for concurrent use, report errors
// rather than panic, and honour ctx: a Store that is down must make Get and
// Set return an error quickly, not hang, when ctx allows, since a call to the
// chain waits on them.
//
// Memory is the in-process implementation; redisstore.Cache (in the
// redisstore package, which owns the module's go-redis code) is shared
// between processes, and reports a Redis that is down or slow as
// ErrUnavailable within its Timeout.
type Store interface {
	// Get returns the entry stored under key. ok is false, with a nil
	// error, when there is none or it has expired. An error means the
	// store could not answer (a canceled ctx, a store that is down); ok is
	// then false. The returned Value is the caller's own copy.
	Get(ctx context.Context, key string) (e Entry, ok bool, err error)
	// Set stores e under key for ttl, replacing any entry already there.
	// ttl 0 means the store's default; a negative ttl is an error matching
	// ErrInvalidTTL, and nothing is stored. A zero e.Stored is replaced by
	// the time of the Set. The store keeps its own copy of e.Value.
	Set(ctx context.Context, key string, e Entry, ttl time.Duration) error
}

// Entry is one stored answer.
type Entry struct {
	// Value is the stored answer. Stores treat it as opaque bytes (the
	// chain stores a small JSON document of its own) and copy it on Set
	// and on Get, so neither side can change the other's bytes.
	Value []byte
	// Stored is when the answer was stored, set by the caller; a zero
	// Stored is set to the time of the Set by the store. It is returned as
	// given and is metadata only: expiry counts from the Set, on the
	// store's clock, whatever Stored says.
	Stored time.Time
}

// Bounded is a Store that bounds each Get and Set by a timeout of its own,
// whatever the caller's context allows (redisstore.Cache does): a chain's
// LastGood then adds no bound of its own to the writes it makes behind a
// call.
type Bounded interface {
	Store
	// Timeout is the longest one Get or Set waits for the store.
	Timeout() time.Duration
}

var (
	// ErrInvalidTTL is matched by the error Set returns for a negative
	// ttl. Use 0 for the store's default.
	ErrInvalidTTL = errors.New("cache: invalid ttl")
	// ErrUnavailable is matched by the errors Get and Set of a store shared
	// between processes return when it did not answer within its Timeout,
	// could not be reached, or answered with an error (the cause is wrapped
	// too), and, without a round trip, while the store leaves its server
	// alone after such a failure (see redisstore.CacheConfig.ProbeEvery). A
	// chain serves without the store then: it reads and writes the store's
	// answers only as a fallback, and must not fail because of it.
	ErrUnavailable = errors.New("cache: store unavailable")
	// ErrMalformed is matched by the error Get returns when the value under
	// a key is not in the format Set writes (another program wrote it, or
	// another version of the store in a format it does not know).
	ErrMalformed = errors.New("cache: malformed stored value")
)

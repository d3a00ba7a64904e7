package redisstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/redis/go-redis/v9"
)

// Defaults of CacheConfig's zero fields.
const (
	// defaultCachePrefix is the namespace of a Redis store's keys when
	// CacheConfig.Prefix is empty.
	defaultCachePrefix = "backstop:lastgood:"
	// defaultCacheTimeout bounds each Get and Set of a Redis store when
	// CacheConfig.Timeout is 0.
	defaultCacheTimeout = 50 * time.Millisecond
	// defaultCacheTTL is how long a Redis store keeps an answer when
	// CacheConfig.TTL and Set's ttl are 0.
	defaultCacheTTL = 24 * time.Hour
	// defaultCacheProbeEvery is how long a Redis store leaves Redis alone
	// after a failure when CacheConfig.ProbeEvery is 0.
	defaultCacheProbeEvery = time.Second
)

// CacheConfig configures NewCache. The zero value means every default.
type CacheConfig struct {
	// Prefix is put before every key, so that the store's keys have a
	// namespace of their own in a Redis shared with other uses. Empty means
	// "backstop:lastgood:". Stores that share a Redis
	// and a Prefix share their answers: replicas of one service should.
	Prefix string
	// TTL is how long an answer is kept when Set is given ttl 0. 0 means
	// 24h; negative is an error. Every key the store writes
	// expires: nothing lingers in Redis.
	TTL time.Duration
	// Timeout bounds each Get and Set, on top of the caller's context: a
	// slow or unreachable Redis costs a call at most this long, after which
	// Get and Set return an error matching cache.ErrUnavailable. 0 means
	// 50ms; negative is an error. Keep it short: the
	// store is read when every model has failed and written after every
	// answer.
	Timeout time.Duration
	// ProbeEvery is how long Redis is left alone after a Get or Set failed
	// for want of it (cache.ErrUnavailable): until then Get and Set return an
	// error matching cache.ErrUnavailable at once, without a round trip; then one
	// call tries Redis again. A slow or paused Redis thus costs one call a
	// Timeout per ProbeEvery, not every call. 0 means
	// 1s; negative is an error.
	ProbeEvery time.Duration
	// OnError, when set, is called each time Redis becomes unavailable,
	// with an error matching cache.ErrUnavailable, and each time it answers
	// again, with nil. It runs on the calling goroutine: keep it quick.
	OnError func(err error)
	// Logger receives a Warn record "backstop: last-known-good store
	// unavailable, serving without it" and an Info record "backstop:
	// last-known-good store available again, using it" at the same
	// moments. nil means slog.Default() at the time of the record.
	Logger *slog.Logger
}

// Cache is a cache.Store in Redis (or any server speaking its protocol,
// such as Valkey), through a github.com/redis/go-redis/v9 client, so that
// the replicas of a service share their last-known-good answers: give it to
// degrade.LastGood. It is safe for concurrent use. Build one with NewCache;
// the zero value is not usable. (It was cache.Redis, built by
// cache.NewRedis, before the go-redis code moved here.)
//
// Each entry is one Redis string under CacheConfig.Prefix followed by the
// store key, written with SET ... PX, so that Redis expires it, ttl after
// the Set (rounded up to a whole millisecond), on the server's clock. The
// value is a 13-byte header followed by cache.Entry.Value:
//
//	byte 0      format version, 1
//	bytes 1-8   cache.Entry.Stored as Unix seconds, int64 big-endian
//	bytes 9-12  cache.Entry.Stored's nanoseconds in its second, uint32 big-endian
//	bytes 13-   cache.Entry.Value, as given
//
// Get returns Stored as the same instant (time.Time.Equal), in the local
// time zone and without a monotonic clock reading.
//
// A Cache starts no goroutine of its own and holds nothing to close: the
// client is the caller's, to share and to close. Get and Set never wait for
// Redis longer than the Timeout: a Redis that is down or slow makes them
// return an error matching cache.ErrUnavailable, which a chain treats as "no
// answer remembered" and carries on; for ProbeEvery after such a failure
// they return it at once, without a round trip or an allocation, as the
// shared breaker and budget stores do. The caller's context bounds them
// too: its deadline exactly; its cancellation when go-redis next looks at
// it (waiting for a connection, dialing, between retries), which go-redis
// does not do during a read or write, so a cancellation may take effect
// only at the Timeout.
type Cache struct {
	client  redis.UniversalClient
	prefix  string
	ttl     time.Duration
	timeout time.Duration
	health  *remote.Health // on the clock of time.Since(base)
	base    time.Time
	// leftAlone is returned, without a round trip or an allocation, while
	// Redis is left alone after a failure.
	leftAlone error
}

var _ cache.Bounded = (*Cache)(nil)

// Layout of a stored value; see Cache.
const (
	cacheFormat    = 1
	cacheHeaderLen = 1 + 8 + 4
)

// NewCache returns a store that keeps its entries in Redis through client,
// configured by opts (the zero CacheConfig for every default). Errors wrap
// llm.ErrInvalidConfig and name what to change: a nil client, a negative TTL,
// Timeout or ProbeEvery, or a client whose options do not bound commands by
// their context. NewCache makes no round trip: Redis may be down when it is
// called.
//
// The client must honour its contexts' deadlines, or the Timeout could not
// bound a Get or Set: in go-redis that is Options.ContextTimeoutEnabled (and
// the same field of ClusterOptions, RingOptions, FailoverOptions and
// UniversalOptions). NewCache checks it on *redis.Client,
// *redis.ClusterClient and *redis.Ring; another implementation of
// redis.UniversalClient must honour them itself. For example:
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.NewCache(client, redisstore.CacheConfig{})
func NewCache(client redis.UniversalClient, opts CacheConfig) (*Cache, error) {
	found := problems.In(errCacheHead, "redis store")
	if p := checkClient(client, "the store's Timeout"); p != "" {
		found.Addf("%s", p)
	}
	problems.NotNegative(found, "TTL", opts.TTL, defaultCacheTTL)
	problems.NotNegative(found, "Timeout", opts.Timeout, defaultCacheTimeout)
	problems.NotNegative(found, "ProbeEvery", opts.ProbeEvery, defaultCacheProbeEvery)
	if err := found.Err(); err != nil {
		return nil, err
	}
	r := &Cache{
		client:  client,
		prefix:  cmp.Or(opts.Prefix, defaultCachePrefix),
		ttl:     cmp.Or(opts.TTL, defaultCacheTTL),
		timeout: cmp.Or(opts.Timeout, defaultCacheTimeout),
		base:    time.Now(),
	}
	probe := cmp.Or(opts.ProbeEvery, defaultCacheProbeEvery)
	r.health = remote.NewHealth("last-known-good store", r.prefix, probe, opts.OnError, opts.Logger).
		Saying("serving without it", "using it")
	r.leftAlone = fmt.Errorf("%w: redis store %q: Redis failed recently; the next try is after ProbeEvery (%v)", cache.ErrUnavailable, r.prefix, probe)
	return r, nil
}

// Get returns the entry stored under key, in the store's own copy of the
// bytes Redis sent. ok is false, with a nil error, when there is none or it
// has expired. Errors: ctx.Err() when ctx is already done (Redis is not
// asked); the caller's ctx error, wrapped, when ctx ends while Redis is
// asked; an error matching cache.ErrUnavailable, wrapping the cause, when Redis
// did not answer within the Timeout, could not be reached or answered with
// an error, and, at once, while Redis is left alone after that (see
// CacheConfig.ProbeEvery); an error matching cache.ErrMalformed when the value
// under the key is not in the store's format, or not a string at all.
func (r *Cache) Get(ctx context.Context, key string) (cache.Entry, bool, error) {
	if err := ctx.Err(); err != nil {
		return cache.Entry{}, false, err
	}
	if use, _ := r.health.Use(r.now()); !use {
		return cache.Entry{}, false, r.leftAlone
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel() // after failed, which asks tctx why the round trip ended
	b, err := r.client.Get(tctx, r.prefix+key).Bytes()
	if errors.Is(err, redis.Nil) {
		r.health.Succeeded()
		return cache.Entry{}, false, nil
	}
	if redis.HasErrorPrefix(err, "WRONGTYPE") {
		r.health.Succeeded() // Redis answers; the next Set replaces the value
		return cache.Entry{}, false, fmt.Errorf("%w: redis store: get of key %q: %w", cache.ErrMalformed, r.prefix+key, err)
	}
	if err != nil {
		return cache.Entry{}, false, r.failed(ctx, tctx, "get", err)
	}
	r.health.Succeeded()
	e, err := decodeCache(b)
	if err != nil {
		return cache.Entry{}, false, fmt.Errorf("%w: redis store: get of key %q: %w", cache.ErrMalformed, r.prefix+key, err)
	}
	return e, true, nil
}

// Set stores e under key for ttl (0 means the store's TTL), replacing any
// entry already there. A zero e.Stored is set to time.Now(). Errors, and
// nothing stored: ctx.Err() when ctx is already done; an error matching
// cache.ErrInvalidTTL when ttl is negative; and, as for Get, the caller's ctx
// error or an error matching cache.ErrUnavailable when Redis did not confirm the
// write in time (it may have been made all the same) or is left alone.
func (r *Cache) Set(ctx context.Context, key string, e cache.Entry, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if ttl < 0 {
		return fmt.Errorf("%w: redis store: ttl is %v; it must not be negative (0 means the store's default, %v)", cache.ErrInvalidTTL, ttl, r.ttl)
	}
	ttl = cmp.Or(ttl, r.ttl)
	// Redis counts whole milliseconds: round up, so that an entry never
	// expires before it was asked to (and a ttl under 1ms is not 0).
	ttl = (ttl + time.Millisecond - 1).Truncate(time.Millisecond)
	if use, _ := r.health.Use(r.now()); !use {
		return r.leftAlone
	}
	if e.Stored.IsZero() {
		e.Stored = time.Now()
	}
	tctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel() // after failed, which asks tctx why the round trip ended
	err := r.client.Set(tctx, r.prefix+key, encodeCache(e), ttl).Err()
	if err != nil {
		return r.failed(ctx, tctx, "set", err)
	}
	r.health.Succeeded()
	return nil
}

// Timeout is the longest one Get or Set waits for Redis (CacheConfig.Timeout):
// a chain's LastGood adds no bound of its own to the writes it makes behind
// a call (see cache.Bounded).
func (r *Cache) Timeout() time.Duration { return r.timeout }

// isAvailable reports whether Redis answered the store's last round trip.
func (r *Cache) isAvailable() bool { return r.health.Available() }

// now is the time on the clock of the store's Health.
func (r *Cache) now() int64 { return int64(time.Since(r.base)) }

// failed wraps an error from the client of a round trip under tctx: the
// caller's own context error when ctx ended it (its cancellation, or its
// deadline when that came before the Timeout's), which says nothing about
// Redis; cache.ErrUnavailable otherwise, after which Redis is left alone for
// ProbeEvery.
func (r *Cache) failed(ctx, tctx context.Context, op string, err error) error {
	cerr, timedOut := remote.Blame(ctx, tctx, err)
	switch {
	case cerr != nil && errors.Is(err, cerr):
		return fmt.Errorf("redis store: %s: %w", op, err)
	case cerr != nil:
		return fmt.Errorf("redis store: %s: %w (%v)", op, cerr, err)
	case timedOut:
		err = fmt.Errorf("%w: redis store: %s: no answer from Redis within the store's Timeout (%v): %w", cache.ErrUnavailable, op, r.timeout, remote.Late(err))
	default:
		err = fmt.Errorf("%w: redis store: %s: %w", cache.ErrUnavailable, op, err)
	}
	r.health.Failed(r.now(), err)
	return err
}

// encodeCache returns e in the stored format; see Cache.
func encodeCache(e cache.Entry) []byte {
	b := make([]byte, cacheHeaderLen, cacheHeaderLen+len(e.Value))
	b[0] = cacheFormat
	binary.BigEndian.PutUint64(b[1:9], uint64(e.Stored.Unix()))
	binary.BigEndian.PutUint32(b[9:13], uint32(e.Stored.Nanosecond()))
	return append(b, e.Value...)
}

// decodeCache parses a value in the stored format; b's bytes become the
// cache.Entry's Value.
func decodeCache(b []byte) (cache.Entry, error) {
	if len(b) < cacheHeaderLen {
		return cache.Entry{}, fmt.Errorf("%d bytes, shorter than the %d-byte header", len(b), cacheHeaderLen)
	}
	if b[0] != cacheFormat {
		return cache.Entry{}, fmt.Errorf("format version %d; this version reads %d", b[0], cacheFormat)
	}
	sec := int64(binary.BigEndian.Uint64(b[1:9]))
	nsec := binary.BigEndian.Uint32(b[9:13])
	if nsec >= uint32(time.Second) {
		return cache.Entry{}, fmt.Errorf("stored time has %d nanoseconds within its second", nsec)
	}
	stored := time.Unix(sec, int64(nsec))
	if stored.Unix() != sec { // beyond time.Time's range
		return cache.Entry{}, fmt.Errorf("stored time of %d Unix seconds is out of range", sec)
	}
	return cache.Entry{Value: b[cacheHeaderLen:len(b):len(b)], Stored: stored}, nil
}

package budget

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/internal/remote"
)

// Defaults of SharedConfig's zero fields.
const (
	// defaultSharedTimeout bounds each Redis round trip of a Shared budget
	// when SharedConfig.Timeout is 0.
	defaultSharedTimeout = 50 * time.Millisecond
	// defaultFlushEvery is how long a Shared budget keeps first attempts
	// to itself, at most, when SharedConfig.FlushEvery is 0.
	defaultFlushEvery = time.Second
	// defaultFlushAfter is how many first attempts a Shared budget keeps
	// to itself, at most, when SharedConfig.FlushAfter is 0.
	defaultFlushAfter = 100
	// defaultProbeEvery is how long a Shared budget leaves Redis alone
	// after a failure when SharedConfig.ProbeEvery is 0.
	defaultProbeEvery = time.Second
)

// ErrSharedUnavailable is matched by the errors a Shared budget passes to
// SharedConfig.OnError and returns from Flush and Counts when its store
// (Redis) did not answer within the Timeout, could not be reached or
// answered with an error; the cause is wrapped too. Withdraw never returns
// it: a Shared budget decides with its local budget instead.
var ErrSharedUnavailable = errors.New("budget: shared budget unavailable")

// Store keeps the window of a Shared budget where the replicas of a
// service share it, and runs each of its round trips atomically: what a
// Shared asks, one op per round trip. redisstore builds one on Redis
// (redisstore.Store.Budget), where each is one Lua script; the ops are
// internal to the module, so redisstore's is the one implementation
// outside its tests. Shared owns
// everything else: batching first attempts, the Timeout, leaving a failed
// store alone, the Local budget that decides meanwhile, the log records
// and the callbacks.
//
// Run honours ctx's deadline. An error whose chain holds an error with a
// RedisError() method (go-redis's error replies) is an answer from the
// server that waiting does not mend, such as NOPERM: the Shared logs it
// again at each probe that finds it.
type Store interface {
	// Key names the budget in errors and log records: the Redis key.
	Key() string
	// Run applies op to the window atomically and returns the window's
	// counts, op's changes included.
	Run(ctx context.Context, op remote.BudgetOp) (remote.BudgetResult, error)
}

// SharedConfig configures NewShared. The zero value means every default.
type SharedConfig struct {
	// Ratio is the budget the replicas share, with the semantics of
	// NewRatio's: the retries granted in the rolling Window, by all the
	// replicas on one key together, may not exceed max(MinRetries,
	// Ratio * the first attempts they recorded in the Window). Zero fields
	// take RatioConfig's defaults (10%, 10s, a floor of 10). Replicas
	// sharing a key should share this configuration too: each applies its
	// own to the shared counts.
	Ratio RatioConfig
	// Timeout bounds each Redis round trip, on top of the caller's
	// context: a slow or unreachable Redis costs a call at most this long,
	// after which the decision is made locally. 0 means
	// 50ms; negative is an error.
	Timeout time.Duration
	// Local decides while Redis is unavailable. It is told of every
	// attempt (Record), so it knows this replica's recent traffic when it
	// takes over; Withdraw and Refund go to it only while Redis is
	// unavailable, so it takes over with none of its retries spent. nil
	// means a NewRatio of the Ratio configuration: each replica falls back
	// to a budget of its own, as if nothing were shared.
	Local Budget
	// FlushEvery and FlushAfter bound how long and how many first attempts
	// a replica counts to itself before it writes them to Redis: Record
	// writes them (one round trip, on the calling goroutine, bounded by
	// the Timeout) once FlushAfter are waiting or FlushEvery has passed
	// since the last write, and Withdraw always carries them. 0 means
	// 1s and 100; negative is an
	// error. A first attempt still waiting is unknown to the other
	// replicas, which can only make them grant fewer retries, never more.
	FlushEvery time.Duration
	FlushAfter int
	// ProbeEvery is how long Redis is left alone after it failed: until
	// then every decision is local and no round trip is tried; then one
	// call tries Redis again, and shared decisions resume when it answers.
	// 0 means 1s; negative is an error.
	ProbeEvery time.Duration
	// OnError, when set, is called each time Redis becomes unavailable,
	// with an error matching ErrSharedUnavailable that wraps the cause,
	// and each time it answers again, with nil: feed a metric with it. It
	// runs on the goroutine whose call saw the change, so keep it quick.
	// Failures while Redis is already unavailable do not call it again.
	OnError func(err error)
	// Available, when set, is asked before each round trip: while it
	// reports false, the budget decides locally without trying Redis, and
	// its own health is left as it is. A shared chain passes its shared
	// breaker state's Available, so that a Redis that failed one of the
	// chain's stores costs a call one Timeout, not one per store.
	Available func() bool
	// Logger receives a Warn record "backstop: shared budget unavailable,
	// using local state" each time Redis becomes unavailable and an Info
	// record "backstop: shared budget available again, using shared state"
	// each time it answers again. nil means slog.Default() at the time of
	// the record.
	Logger *slog.Logger
}

// Shared is a ratio retry budget kept in a Store (Redis), so that the
// replicas of a service budget one target together: 40 replicas with local
// budgets grant 40 floors of retries to a failing target, 40 replicas on
// one Shared key grant one. It is safe for concurrent use. Build one with
// NewShared; the zero value is not usable.
//
// Record counts first attempts in an atomic counter and writes them to the
// store in batches (see SharedConfig.FlushEvery); between writes it costs
// a clock read, the local budget's Record and an atomic add, and does not
// allocate. Withdraw is one round trip, which adds this replica's waiting
// first attempts, sums the window and grants a retry iff the retries in it
// are fewer than max(MinRetries, Ratio * first attempts), all atomically in
// the store, so concurrent replicas never grant more than one budget
// allows. Refund is one round trip too.
//
// The window is Buckets buckets of Window/Buckets each, on the store's
// clock (the Redis server's TIME): replicas whose clocks disagree still
// agree on the window, at no round trip's cost. The store forgets a window
// two Windows after its last write, so nothing lingers once the traffic
// stops. The key is the budget's: on Redis, a value of another type under
// it (a string SET there, say) would fail every round trip, so the store
// deletes it and goes on with an empty window, and a Warn record says so
// each time.
//
// When the store fails or does not answer within the Timeout, that call
// decides with the Local budget, and so does every call for the next
// ProbeEvery; then one call tries the store again. No call fails, or waits
// longer than the Timeout, because of Redis; OnError and the Logger say
// when Redis becomes unavailable and when it answers again. First attempts
// a failed round trip carried are lost to the shared count (they may or
// may not have been written), which can only lower the shared allowance.
//
// A Shared starts no goroutine of its own and holds nothing to close: the
// store and its client are the caller's, to share and to close.
type Shared struct {
	store  Store
	key    string
	shape  remote.BudgetOp // the window, as every round trip gives it to the store
	local  Budget
	config RatioConfig

	timeout    time.Duration
	flushEvery int64 // nanoseconds
	flushAfter int64
	health     *remote.Health // on the clock of now
	available  func() bool    // SharedConfig.Available; nil: always

	base time.Time // monotonic origin of the times below

	pending   atomic.Int64 // first attempts not yet written
	lastFlush atomic.Int64 // when pending was last taken, since base
	flushing  atomic.Bool  // a Record is writing a batch
}

var _ refunder = (*Shared)(nil)

// NewShared returns a retry budget that the replicas whose stores are on
// the same key share, configured by opts (the zero SharedConfig for every
// default). A store names the budget, one per chain and target, such as
// "backstop:budget:" + chain + ":" + target; on Redis
// (redisstore.Store.Budget) it is one hash, so it works on a Redis Cluster
// too. The key is the budget's: a value of another type found under it is
// deleted (see Shared).
//
// Errors wrap llm.ErrInvalidConfig and name what to change: a nil store, a
// store with an empty key, an invalid Ratio, a negative Timeout,
// FlushEvery, FlushAfter or ProbeEvery. NewShared makes no round trip: the
// store may be down when it is called.
func NewShared(store Store, opts SharedConfig) (*Shared, error) {
	found := problems.In(errHead, "shared budget")
	bad := found.Addf
	var key string
	if store == nil {
		bad("store is nil; build one on Redis with redisstore.New(client), then its Budget(key)")
	} else if key = store.Key(); key == "" {
		bad(`key is empty; name the budget, one per chain and target, such as "backstop:budget:" + chain + ":" + target`)
	}
	found.Add(opts.Ratio.Validate())
	problems.NotNegative(found, "Timeout", opts.Timeout, defaultSharedTimeout)
	problems.NotNegative(found, "FlushEvery", opts.FlushEvery, defaultFlushEvery)
	problems.NotNegative(found, "ProbeEvery", opts.ProbeEvery, defaultProbeEvery)
	problems.NotNegative(found, "FlushAfter", opts.FlushAfter, defaultFlushAfter)
	if err := found.Err(); err != nil {
		return nil, err
	}

	c := opts.Ratio.withDefaults()
	s := &Shared{
		store:      store,
		key:        key,
		local:      opts.Local,
		config:     c,
		timeout:    cmp.Or(opts.Timeout, defaultSharedTimeout),
		flushEvery: int64(cmp.Or(opts.FlushEvery, defaultFlushEvery)),
		flushAfter: int64(cmp.Or(opts.FlushAfter, defaultFlushAfter)),
		health: remote.NewHealth("shared budget", key, cmp.Or(opts.ProbeEvery, defaultProbeEvery),
			opts.OnError, opts.Logger),
		available: opts.Available,
		base:      time.Now(),
	}
	if s.local == nil {
		r, err := NewRatio(c)
		if err != nil {
			return nil, err // unreachable: c was validated
		}
		s.local = r
	}
	// The window's buckets, as Ratio's: Window >= minWindow makes each at
	// least a millisecond. The store keeps the window two Windows after
	// its last write, in whole milliseconds.
	s.shape = remote.BudgetOp{
		Bucket:  c.Window / bucketCount,
		Buckets: bucketCount,
		Ratio:   int64(math.Round(c.Ratio * ppm)),
		TTL:     (2*c.Window + time.Millisecond - 1).Truncate(time.Millisecond),
	}
	if c.MinRetries > 0 {
		s.shape.Floor = int64(c.MinRetries)
	}
	return s, nil
}

// Record tells the Local budget of o and, if o is a first attempt, counts
// it for the shared window. The count is written to Redis with the next
// Withdraw, or by this Record once FlushAfter first attempts are waiting or
// FlushEvery has passed since the last write: one round trip, bounded by the
// Timeout and not by ctx's cancellation (only its values are kept), so that
// a canceled call still has its attempt counted. Between writes Record does
// not allocate. Retries were counted when Withdraw granted them, and
// successes and failures do not matter to a ratio budget.
func (s *Shared) Record(ctx context.Context, o Outcome) {
	if o.Retry {
		s.local.Record(ctx, o)
		return
	}
	if o.At.IsZero() {
		o.At = time.Now() // one clock read for the local budget and the flush
	}
	s.local.Record(ctx, o)
	n := s.pending.Add(1)
	now := max(int64(o.At.Sub(s.base)), 0)
	if n < s.flushAfter && now-s.lastFlush.Load() < s.flushEvery {
		return
	}
	if s.health.Down(now) {
		return // Redis is left alone; the count waits for it
	}
	s.flush(ctx, now)
}

// flush writes the waiting first attempts, unless another Record is
// already writing a batch or Redis is left alone.
func (s *Shared) flush(ctx context.Context, now int64) {
	if !s.flushing.CompareAndSwap(false, true) {
		return // this count goes with the next batch
	}
	defer s.flushing.Store(false)
	if s.pending.Load() < s.flushAfter && now-s.lastFlush.Load() < s.flushEvery {
		return // another Record wrote the batch meanwhile
	}
	use, probe := s.use(now)
	if !use {
		return
	}
	s.lastFlush.Store(now)
	n := s.pending.Swap(0)
	if n == 0 && !probe {
		return
	}
	s.decide(context.WithoutCancel(ctx), remote.BudgetCount, n)
}

// Withdraw grants a retry, and counts it in Redis, when the retries all
// replicas were granted in the window are fewer than max(MinRetries,
// Ratio * first attempts in the window); otherwise it returns ErrExhausted.
// It carries this replica's waiting first attempts in the same round trip.
//
// When Redis is unavailable, does not answer within the Timeout, or ctx
// ends first, the Local budget decides instead; so it does for ProbeEvery
// after a failure. Withdraw returns nil or ErrExhausted, or, when the Local
// budget decides, what it returns.
func (s *Shared) Withdraw(ctx context.Context) error {
	if ctx.Err() == nil {
		now := s.now()
		if use, _ := s.use(now); use {
			s.lastFlush.Store(now)
			if r, ok := s.decide(ctx, remote.BudgetWithdraw, s.pending.Swap(0)); ok {
				if r.Granted {
					return nil
				}
				return ErrExhausted
			}
		}
	}
	return s.local.Withdraw(ctx)
}

// Refund takes back a retry Withdraw granted that was not sent, from the
// budget that decides now: the shared window while Redis answers (one
// round trip, bounded by the Timeout and not by ctx's cancellation, so a
// canceled call can refund), the Local budget, if it has a Refund method, while
// Redis is unavailable. In the shared window the retry comes off the
// newest bucket that counts one, so that it leaves the window no later than
// the grant it cancels, and the window's retries never go below zero. If
// the round trip fails the retry stays counted.
func (s *Shared) Refund(ctx context.Context) {
	if use, _ := s.use(s.now()); use {
		s.decide(context.WithoutCancel(ctx), remote.BudgetRefund, 0)
		return
	}
	if r, ok := s.local.(refunder); ok {
		r.Refund(ctx)
	}
}

// Flush writes the first attempts Record counted and has not written yet,
// whatever FlushEvery and FlushAfter say and whether or not Redis is
// available: call it before a replica stops, or in tests. It returns ctx's
// error when ctx ends first, or an error matching ErrSharedUnavailable when
// Redis did not answer within the Timeout or failed; the first attempts
// are then lost to the shared count. Flush does not change whether the
// budget considers Redis available.
func (s *Shared) Flush(ctx context.Context) error {
	n := s.pending.Swap(0)
	if n == 0 {
		return nil
	}
	s.lastFlush.Store(s.now())
	_, err := s.run(ctx, remote.BudgetCount, n)
	return err
}

// Counts returns the first attempts and the retries all replicas recorded
// in the current shared window, as Redis holds them (without this replica's
// first attempts that are still waiting to be written). It is one round
// trip, meant for tests and telemetry; errors are as for Flush.
func (s *Shared) Counts(ctx context.Context) (firsts, retries int64, err error) {
	r, err := s.run(ctx, remote.BudgetCount, 0)
	return r.Firsts, r.Retries, err
}

// Available reports whether decisions go to Redis: false from a failed
// round trip until one succeeds again.
func (s *Shared) Available() bool { return s.health.Available() }

// use is Health.Use, unless Available says Redis is down.
func (s *Shared) use(now int64) (use, probe bool) {
	if s.available != nil && !s.available() {
		return false, false
	}
	return s.health.Use(now)
}

// Config returns the ratio configuration s runs with, defaults filled in.
func (s *Shared) settings() RatioConfig { return s.config }

// now returns the time since s.base.
func (s *Shared) now() int64 { return int64(time.Since(s.base)) }

// decide makes one round trip and records whether the store answered. ok
// is false when it did not, or when ctx ended first (which says nothing
// about Redis); the caller then decides locally.
func (s *Shared) decide(ctx context.Context, op remote.BudgetOpKind, pending int64) (r remote.BudgetResult, ok bool) {
	r, err := s.run(ctx, op, pending)
	if err == nil {
		s.health.Succeeded()
		return r, true
	}
	if errors.Is(err, ErrSharedUnavailable) { // not the caller's own end
		s.health.Failed(s.now(), err)
	}
	return r, false
}

// run makes one round trip to the store, bounded by the Timeout, and logs
// the repair of a key that held a value of another type.
func (s *Shared) run(ctx context.Context, op remote.BudgetOpKind, pending int64) (remote.BudgetResult, error) {
	if err := ctx.Err(); err != nil {
		return remote.BudgetResult{}, err
	}
	o := s.shape
	o.Kind, o.Pending = op, pending
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	r, err := s.store.Run(tctx, o)
	var cerr error
	var timedOut bool
	if err != nil {
		cerr, timedOut = remote.Blame(ctx, tctx, err)
	}
	cancel()
	if err != nil {
		if cerr != nil { // says nothing about Redis
			return remote.BudgetResult{}, fmt.Errorf("shared budget %q: %w (%v)", s.key, cerr, err)
		}
		if timedOut { // go-redis reports it as a context or a network timeout
			return remote.BudgetResult{}, fmt.Errorf("%w: key %q: no answer from Redis within the Timeout (%v): %w", ErrSharedUnavailable, s.key, s.timeout, remote.Late(err))
		}
		return remote.BudgetResult{}, fmt.Errorf("%w: key %q: %w", ErrSharedUnavailable, s.key, err)
	}
	if r.Repaired != "" {
		s.health.Repaired(r.Repaired)
	}
	return r, nil
}

package spend

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/internal/remote"
)

// Defaults of SharedConfig's zero fields.
const (
	// defaultSharedTimeout bounds each operation of a Shared store when
	// SharedConfig.Timeout is 0 (see SharedConfig.Timeout for why it is
	// longer than the other shared stores' 50ms).
	defaultSharedTimeout = 250 * time.Millisecond
	// defaultProbeEvery is how long a Shared store leaves Redis alone
	// after a failure when SharedConfig.ProbeEvery is 0.
	defaultProbeEvery = time.Second
	// defaultKeepFor is how long a Shared remembers a budget key's period
	// when Reserve or Settle is given a ttl of 0 or less.
	defaultKeepFor = 32 * 24 * time.Hour
	// countFor is how long a Shared keeps the highest replica count a
	// ReplicaStore answered before a lower one replaces it.
	countFor = time.Minute
)

// ReplicaStore is a Store that also counts the replicas sharing it, as
// redisstore.Store.Spend's does. A Shared on one makes every reservation
// with ReserveAs, under a random id of its own, and divides its outage
// allowance by the replicas counted (see SharedConfig.Replicas).
type ReplicaStore interface {
	Store
	// ReserveAs is Reserve made by the replica id: it also records id as
	// sharing key's period now, and reports how many distinct ids did so
	// within the last minute, id included.
	ReserveAs(ctx context.Context, id, key string, period int64, amount, limit cost.Money, ttl time.Duration) (ok bool, used cost.Money, replicas int, err error)
}

// errSharedHead begins every configuration problem of NewShared.
var errSharedHead = problems.Head("spend: invalid configuration")

// ErrSharedUnavailable is matched by the errors a Shared passes to
// SharedConfig.OnError and returns from Used and Flush when its store
// (Redis) did not answer within the Timeout, could not be reached or
// answered with an error; the cause is wrapped too. Reserve and Settle
// never return it: a Shared decides locally instead.
var ErrSharedUnavailable = errors.New("spend: shared spend store unavailable")

// SharedConfig configures NewShared. The zero value means every default.
type SharedConfig struct {
	// Timeout bounds each Reserve, Settle and Used, on top of the caller's
	// context, all its round trips together: a slow or unreachable Redis
	// costs a call at most this long, after which the decision is made
	// locally. 0 means 250ms; negative is an error.
	//
	// It is longer than the other shared stores' 50ms because a round
	// trip that times out on a healthy Redis costs money, not only
	// precision: a burst of calls queues for the client's connections (a
	// replica's 250 calls arriving at once behind 20 connections, in the
	// storm lab on 2 shared cores, waited past 50ms in most runs), and
	// each replica then spends from its outage allowance on top of what
	// Redis grants, up to limit + Σ (limit - u) / N in all, where with
	// 250ms no replica decided locally and spend ended within the limit.
	// 250ms is small beside an LLM call and is paid only by the calls
	// under way when Redis stops answering. Lower it only with a client
	// whose pool has room for the burst.
	Timeout time.Duration
	// ProbeEvery is how long Redis is left alone after it failed: until
	// then every decision is local and no round trip is tried; then one
	// call tries Redis again. 0 means 1s; negative is an error.
	ProbeEvery time.Duration
	// Replicas is the least number of replicas the outage allowance
	// assumes share the budget: while Redis is unavailable each replica
	// may spend on a budget key, over the period, at most 1/N of what
	// remained of its limit when it first decided locally (see Shared),
	// N being the larger of Replicas and the count the store last
	// answered. A ReplicaStore (redisstore's) counts the replicas that
	// reserved on the key within the last minute (the highest count in
	// the last minute is kept), so 0, the default, means that count: set
	// Replicas only to cover replicas that have not reserved yet, such as
	// those a deployment is about to start. Without a count (a store that
	// is not a ReplicaStore, or a replica that never reached Redis) 0
	// means 1: each replica may spend all that remained, and N replicas
	// may together overshoot the limit by (N-1) times what remained.
	// Negative is an error. A value above the real count refuses or
	// degrades calls the budget could have covered.
	Replicas int
	// OnError, when set, is called each time Redis becomes unavailable,
	// with an error matching ErrSharedUnavailable that wraps the cause,
	// and each time it answers again, with nil: feed a metric with it. It
	// runs on the goroutine whose call saw the change, so keep it quick.
	// Failures while Redis is already unavailable do not call it again.
	OnError func(err error)
	// Available, when set, is asked before each round trip: while it
	// reports false, the store decides locally without trying Redis, and
	// its own health is left as it is. A shared chain passes its shared
	// state's Available, so that a Redis that failed one of its stores
	// costs a call one Timeout, not one per store.
	Available func() bool
	// Logger receives a Warn record "backstop: shared spend store
	// unavailable, using local state" each time Redis becomes unavailable,
	// an Info record "backstop: shared spend store available again, using
	// shared state" each time it answers again, and a Warn record each
	// time the store repairs a key that held something else. nil means
	// slog.Default() at the time of the record.
	Logger *slog.Logger
}

// Shared is a Store (a spend.Budget's) kept in another Store that the
// replicas of a service share, on Redis (redisstore.Store.Spend), so that
// a Redis that is slow or down never blocks a call. It is safe for
// concurrent use. Build one with NewShared; the zero value is not usable.
//
// While Redis answers, every Reserve, Settle and Used is made on it, each
// bounded by the Timeout: a Reserve is one round trip and a Settle one, so
// a budgeted attempt costs 2. Reservations are atomic on Redis, so all the
// replicas together spend at most the limit plus what one attempt's worst
// case underestimates.
//
// When Redis fails or does not answer within the Timeout, that call and
// every call for the next ProbeEvery decide locally, then one call tries
// Redis again; none waits for it. OnError and the Logger say when Redis
// becomes unavailable and when it answers again. Meanwhile, on each budget
// key and period, a replica reserves in process, up to its outage
// allowance: (limit - u) / N, u being the spent plus reserved it
// last saw on Redis for that key and period (0 when it saw none) when it
// first decided locally in that period. The allowance is drawn once per
// key and period, not once per outage: everything the replica decides
// locally in the period, over every outage, counts against it (its local
// reservations, then their spend, written to Redis or not), so a Redis
// that answers and times out by turns (a burst) cannot multiply it. N is
// the larger of SharedConfig.Replicas and the replicas Redis counted: the
// store redisstore.Store.Spend returns records each replica's random id
// in the key's hash with each of its reservations, in the same script,
// and counts those seen within the last minute, so the default needs no
// setting. So, over a period:
//
//   - with N replicas, each of which counted N or was told Replicas = N,
//     and saw u, the replicas spend locally
//     together at most limit - u: during one outage the limit still
//     holds (plus one worst case's underestimate per replica); a replica
//     that saw less than Redis held, or a period it never saw, lets them
//     overshoot by the difference; and as Redis does not know what was
//     spent locally until it is written, the reservations it grants
//     meanwhile may add up to the limit on their own: in all, spend stays
//     within limit + sum over the replicas of (limit - u_r) / N;
//   - a replica that never had a count from Redis (it has not reserved
//     since it started, or its store does not count) and was not given
//     Replicas takes N = 1: it may spend all of limit - u.
//
// Nothing spent is lost: what a replica spends on local reservations, and
// the settlements of reservations it made on Redis before it failed, are
// kept and written to Redis by the next operation on the same key that
// Redis answers (in the same Timeout; one other key's too, each time), or
// by Flush. A reservation made locally is settled locally, even once Redis
// is back; its spend is then written to Redis. A round trip that timed out
// after Redis applied it is counted again when it is written again:
// spend is never lost, and counted twice only in that case, which makes
// the budget stricter, never looser. A reservation that timed out after
// Redis made it holds its amount on Redis until the key expires.
//
// A Shared starts no goroutine of its own and holds nothing to close: the
// store and its client are the caller's.
type Shared struct {
	store     Store
	counter   ReplicaStore // store, when it counts replicas; else nil
	id        string       // this replica's id, for counter
	timeout   time.Duration
	replicas  int            // SharedConfig.Replicas
	health    *remote.Health // on the clock of now
	available func() bool    // SharedConfig.Available; nil: always
	base      time.Time      // monotonic origin of now

	mu        sync.Mutex
	counted   int   // the highest replica count counter answered lately
	countedAt int64 // when it last answered that count, on the clock of now
	keys      map[periodKey]*entry
	dirty     map[periodKey]*entry // the entries with something to write
	nextSweep int
}

var _ Store = (*Shared)(nil)

// periodKey names a budget key's period.
type periodKey struct {
	key    string
	period int64
}

// entry is what a Shared knows of one budget key's period. Guarded by
// Shared.mu.
type entry struct {
	// seen is the spent plus reserved last seen on the store, with this
	// replica's writes since.
	seen cost.Money
	// local counts the reservations made locally and not yet settled, by
	// amount; localReserved is their sum.
	local         map[cost.Money]int
	localReserved cost.Money
	// release and spent are what the store has yet to be told, as one
	// Settle; ttl is the last one given.
	release, spent cost.Money
	ttl            time.Duration
	// drawn is true from the first local decision in the period on, when
	// allowance, what this replica may decide locally in the whole
	// period, was drawn; used is what it has decided locally since, over
	// every outage: its local reservations not yet settled plus the spend
	// of those settled, written to the store or not. Neither is reset
	// when the store answers again: an allowance drawn afresh at each
	// outage would let a store that answers and fails by turns (a burst
	// on a healthy Redis) multiply it.
	drawn           bool
	allowance, used cost.Money
	// expires is when the entry may be forgotten, on the clock of now.
	expires int64
}

// NewShared returns a Store that keeps its spend in store (on Redis:
// redisstore.Store.Spend) while it answers and decides locally while it
// does not, configured by cfg (the zero SharedConfig for every default);
// see Shared. Errors wrap llm.ErrInvalidConfig and name what to change: a
// nil store, a negative Timeout, ProbeEvery or Replicas. NewShared makes
// no round trip: the store may be down when it is called.
func NewShared(store Store, cfg SharedConfig) (*Shared, error) {
	found := problems.In(errSharedHead, "shared spend store")
	if store == nil {
		found.Addf("store is nil; build one on Redis with redisstore.New(client), then its Spend(name)")
	}
	problems.NotNegative(found, "Timeout", cfg.Timeout, defaultSharedTimeout)
	problems.NotNegative(found, "ProbeEvery", cfg.ProbeEvery, defaultProbeEvery)
	problems.NotNegative(found, "Replicas", cfg.Replicas, "the replicas the store counted, or 1 without a count")
	if err := found.Err(); err != nil {
		return nil, err
	}
	var key string
	if k, ok := store.(interface{ Key() string }); ok {
		key = k.Key()
	}
	counter, _ := store.(ReplicaStore)
	var id [8]byte
	_, _ = rand.Read(id[:]) // never fails
	return &Shared{
		store:    store,
		counter:  counter,
		id:       hex.EncodeToString(id[:]),
		timeout:  cmp.Or(cfg.Timeout, defaultSharedTimeout),
		replicas: cfg.Replicas,
		health: remote.NewHealth("shared spend store", key, cmp.Or(cfg.ProbeEvery, defaultProbeEvery),
			cfg.OnError, cfg.Logger),
		available: cfg.Available,
		base:      time.Now(),
		keys:      make(map[periodKey]*entry),
		dirty:     make(map[periodKey]*entry),
		nextSweep: 64,
	}, nil
}

// Reserve reserves amount on Redis iff key's spent plus reserved plus
// amount stays within limit in period, after writing what this replica
// has not yet written of the key, all within the Timeout. When Redis is
// unavailable, does not answer in time, or ctx has ended, it decides
// locally within this replica's outage allowance (see Shared), and
// reports as used what it last saw on Redis plus what it holds itself.
// It returns no error.
func (s *Shared) Reserve(ctx context.Context, key string, period int64, amount, limit cost.Money, ttl time.Duration) (bool, cost.Money, error) {
	pk := periodKey{key, period}
	now := s.now()
	if ctx.Err() == nil {
		if use, _ := s.use(now); use {
			count := s.counter != nil
			var ok bool
			var used cost.Money
			var replicas int
			err := s.roundTrip(ctx, pk, func(tctx context.Context) (err error) {
				if count {
					ok, used, replicas, err = s.counter.ReserveAs(tctx, s.id, key, period, amount, limit, ttl)
				} else {
					ok, used, err = s.store.Reserve(tctx, key, period, amount, limit, ttl)
				}
				return err
			})
			if err == nil {
				s.mu.Lock()
				s.entry(pk, now, ttl).seen = used
				if count && (replicas >= s.counted || now-s.countedAt > int64(countFor)) {
					s.counted, s.countedAt = replicas, now
				}
				s.mu.Unlock()
				return ok, used, nil
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(pk, now, ttl)
	if !e.drawn {
		e.drawn = true
		e.allowance = max(limit-e.seen, 0) / cost.Money(max(s.replicas, s.counted, 1))
	}
	if amount > e.allowance-e.used { // as used+amount > allowance, without overflowing
		return false, e.seen + e.localReserved + max(e.spent-e.release, 0), nil
	}
	e.used += amount
	if amount > 0 {
		if e.local == nil {
			e.local = make(map[cost.Money]int)
		}
		e.local[amount]++
		e.localReserved += amount
	}
	return true, e.seen + e.localReserved + max(e.spent-e.release, 0), nil
}

// Settle takes reserved back and adds spent. A reservation this replica
// made locally is settled locally (its spent is then written to Redis);
// one made on Redis is settled there, within the Timeout and whatever ctx's
// cancellation (only its values are kept), together with what this replica
// has not yet written of the key. While Redis is unavailable, or when the
// round trip fails, the settlement is kept and written later (see Shared).
// It returns no error.
func (s *Shared) Settle(ctx context.Context, key string, period int64, reserved, spent cost.Money, ttl time.Duration) error {
	pk := periodKey{key, period}
	now := s.now()
	s.mu.Lock()
	e := s.entry(pk, now, ttl)
	if reserved > 0 && e.local[reserved] > 0 {
		if e.local[reserved]--; e.local[reserved] == 0 {
			delete(e.local, reserved)
		}
		e.localReserved -= reserved
		e.used += spent - reserved
		reserved = 0
	}
	e.release += reserved
	e.spent += spent
	e.ttl = ttl
	dirty := e.release != 0 || e.spent != 0
	if dirty {
		s.dirty[pk] = e
	}
	s.mu.Unlock()
	if !dirty {
		return nil // nothing for Redis: no round trip
	}
	if use, _ := s.use(now); use {
		_ = s.roundTrip(context.WithoutCancel(ctx), pk, nil)
	}
	return nil
}

// Used reports key's spent and reserved in period as Redis holds them,
// after writing what this replica has not yet written of the key, with
// this replica's local reservations added to reserved: one round trip
// (two with a write), for tests and telemetry. It returns ctx's error when
// ctx ends first, or an error matching ErrSharedUnavailable when Redis is
// unavailable or did not answer within the Timeout.
func (s *Shared) Used(ctx context.Context, key string, period int64) (spent, reserved cost.Money, err error) {
	pk := periodKey{key, period}
	now := s.now()
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	if use, _ := s.use(now); !use {
		return 0, 0, fmt.Errorf("%w: Redis failed recently; the next try is after ProbeEvery (%v)", ErrSharedUnavailable, s.health.ProbeEvery())
	}
	err = s.roundTrip(ctx, pk, func(tctx context.Context) (err error) {
		spent, reserved, err = s.store.Used(tctx, key, period)
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.keys[pk]; e != nil {
		e.seen = spent + reserved
		reserved += e.localReserved
	}
	return spent, reserved, nil
}

// Flush writes what this replica has not yet written to Redis, one round
// trip per budget key and period, each bounded by the Timeout, whether or
// not Redis is considered available: call it before a replica stops, or
// in tests. It returns the failures, each matching ErrSharedUnavailable
// (what failed stays to be written), or ctx's error. Flush does not
// change whether the store considers Redis available.
func (s *Shared) Flush(ctx context.Context) error {
	s.mu.Lock()
	pks := make([]periodKey, 0, len(s.dirty))
	for pk := range s.dirty {
		pks = append(pks, pk)
	}
	s.mu.Unlock()
	var errs []error
	for _, pk := range pks {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		tctx, cancel := context.WithTimeout(remote.WithRepair(ctx, s.health.RepairedKey), s.timeout)
		_, err := s.write(tctx, pk)
		if err != nil {
			err = s.wrap(ctx, tctx, err)
		}
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Available reports whether operations go to Redis: false from a failed
// round trip until one succeeds again.
func (s *Shared) Available() bool { return s.health.Available() }

// Pending returns what this replica has yet to write to Redis, over all
// budget keys and periods: reservations of Redis's to release and spend to
// add.
func (s *Shared) Pending() (release, spent cost.Money) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.dirty {
		release += e.release
		spent += e.spent
	}
	return release, spent
}

// roundTrip writes what pk has yet to write, then runs op (when not nil),
// then writes one other key's, all within one Timeout, and records
// whether Redis answered. It returns an error when op or pk's write
// failed.
func (s *Shared) roundTrip(ctx context.Context, pk periodKey, op func(context.Context) error) error {
	tctx, cancel := context.WithTimeout(remote.WithRepair(ctx, s.health.RepairedKey), s.timeout)
	defer cancel() // after wrap, which asks tctx why the round trip ended
	wrote, err := s.write(tctx, pk)
	if err == nil && op != nil {
		err = op(tctx)
	}
	if err == nil {
		if wrote || op != nil {
			s.health.Succeeded()
		}
		s.mu.Lock()
		var other periodKey
		found := false
		for k := range s.dirty {
			if k != pk {
				other, found = k, true
				break
			}
		}
		s.mu.Unlock()
		if found {
			_, _ = s.write(tctx, other) // kept on failure, for a later op
		}
		return nil
	}
	err = s.wrap(ctx, tctx, err)
	if errors.Is(err, ErrSharedUnavailable) { // not the caller's own end
		s.health.Failed(s.now(), err)
	}
	return err
}

// write tells the store what pk has yet to write, as one Settle, and
// reports whether it had anything to write; on failure it is kept for a
// later write.
func (s *Shared) write(ctx context.Context, pk periodKey) (bool, error) {
	s.mu.Lock()
	e := s.dirty[pk]
	if e == nil {
		s.mu.Unlock()
		return false, nil
	}
	release, spent, ttl := e.release, e.spent, e.ttl
	e.release, e.spent = 0, 0
	delete(s.dirty, pk)
	s.mu.Unlock()
	err := s.store.Settle(ctx, pk.key, pk.period, release, spent, ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		e.release += release
		e.spent += spent
		s.dirty[pk] = e
		return true, err
	}
	e.seen = max(e.seen+spent-release, 0)
	return true, nil
}

// wrap describes a failed round trip under tctx (ctx with the Timeout):
// the caller's own context error when ctx ended it, which says nothing
// about Redis; an error matching ErrSharedUnavailable otherwise.
func (s *Shared) wrap(ctx, tctx context.Context, err error) error {
	cerr, timedOut := remote.Blame(ctx, tctx, err)
	switch {
	case cerr != nil:
		return fmt.Errorf("shared spend store: %w (%v)", cerr, err)
	case timedOut:
		return fmt.Errorf("%w: no answer from Redis within the Timeout (%v): %w", ErrSharedUnavailable, s.timeout, remote.Late(err))
	}
	return fmt.Errorf("%w: %w", ErrSharedUnavailable, err)
}

// entry returns pk's entry, made if need be, and keeps it until ttl after
// now. From time to time it forgets the entries that have expired and hold
// nothing to write or settle. Call it with s.mu held.
func (s *Shared) entry(pk periodKey, now int64, ttl time.Duration) *entry {
	if ttl <= 0 {
		ttl = defaultKeepFor
	}
	e := s.keys[pk]
	if e == nil {
		if len(s.keys) >= s.nextSweep {
			for k, old := range s.keys {
				if old.expires < now && old.localReserved == 0 && s.dirty[k] == nil {
					delete(s.keys, k)
				}
			}
			s.nextSweep = max(64, 2*len(s.keys))
		}
		e = &entry{}
		s.keys[pk] = e
	}
	e.expires = max(e.expires, now+int64(ttl))
	return e
}

// use is Health.Use, unless Available says Redis is down.
func (s *Shared) use(now int64) (use, probe bool) {
	if s.available != nil && !s.available() {
		return false, false
	}
	return s.health.Use(now)
}

// now returns the time since s.base.
func (s *Shared) now() int64 { return int64(time.Since(s.base)) }

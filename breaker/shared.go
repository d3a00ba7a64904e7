package breaker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/internal/remote"
)

// Defaults of SharedConfig's zero fields.
const (
	// DefaultSharedTimeout bounds each round trip of a Shared to its store
	// when SharedConfig.Timeout is 0.
	DefaultSharedTimeout = 50 * time.Millisecond
	// DefaultProbeEvery is how long a Shared leaves its store alone after a
	// failure when SharedConfig.ProbeEvery is 0.
	DefaultProbeEvery = time.Second
)

// ErrSharedUnavailable is matched by the errors of a Shared's methods when
// its store (Redis) did not answer within the Timeout, could not be reached
// or answered with an error (the cause is wrapped too), and, without a
// round trip, while the store is left alone after such a failure. Callers
// carry on with their local breakers and gates.
var ErrSharedUnavailable = errors.New("breaker: shared state unavailable")

// Store is where the replicas of a service publish to each other that a
// breaker opened or closed and that a gate closed: what a Shared reads and
// writes, one round trip per method. redisstore builds one on Redis
// (redisstore.Shared.Breakers); Shared owns everything else: the Timeout of
// each round trip, leaving a failed store alone, the log records and the
// callbacks, and what each replica makes of what it reads.
//
// A Store keeps, per name, when its breaker's publication ends and when
// its gate's does, on one clock shared by all replicas (the store's own:
// Redis's TIME), and forgets each once it has ended.
//
// Every method honours ctx's deadline. repaired is empty, or names what the
// store found where it keeps the state and deleted, so that it works again
// (Redis's TYPE of a value of another kind under its key, such as
// "string"): the Shared logs each repair. An error whose chain holds an
// error with a RedisError() method (go-redis's error replies) is an answer
// from the server that waiting does not mend, such as NOPERM: the Shared
// logs it again at each probe that finds it.
type Store interface {
	// Key names the state in errors and log records: the Redis key.
	Key() string
	// Load returns what has been published and has not ended: one Remote
	// per name with an open breaker or a closed gate, in no particular
	// order, each duration what is left on the store's clock, positive.
	Load(ctx context.Context) (published []Remote, repaired string, err error)
	// PublishOpen records that name's breaker is open for d; a
	// publication that ends later is kept.
	PublishOpen(ctx context.Context, name string, d time.Duration) (repaired string, err error)
	// PublishClosed forgets that name's breaker is open.
	PublishClosed(ctx context.Context, name string) (repaired string, err error)
	// PublishGate records that name's gate is closed for d; a closure
	// that ends later is kept.
	PublishGate(ctx context.Context, name string, d time.Duration) (repaired string, err error)
}

// SharedConfig configures NewShared. The zero value means every default.
type SharedConfig struct {
	// Timeout bounds each round trip to the store, on top of the caller's
	// context. 0 means DefaultSharedTimeout (50ms); negative is an error.
	Timeout time.Duration
	// ProbeEvery is how long the store is left alone after a failure:
	// until then every method returns ErrSharedUnavailable at once; then
	// one call tries the store again. 0 means DefaultProbeEvery (1s);
	// negative is an error.
	ProbeEvery time.Duration
	// OnError, when set, is called each time the store becomes
	// unavailable, with an error matching ErrSharedUnavailable, and each
	// time it answers again, with nil. It runs on the calling goroutine:
	// keep it quick.
	OnError func(err error)
	// Logger receives a Warn record "backstop: shared breaker state
	// unavailable, using local state" and an Info record "backstop: shared
	// breaker state available again, using shared state" at the same
	// moments. nil means slog.Default() at the time of the record.
	Logger *slog.Logger
}

// SharedOptions is SharedConfig.
//
// Deprecated: use SharedConfig. SharedOptions is the name earlier versions
// use.
type SharedOptions = SharedConfig

// Remote is what the replicas sharing a Shared have published about one
// name (a chain's target): how much longer its breaker is held open, and
// how much longer its Retry-After gate is closed. Zero means not at all.
type Remote struct {
	Name       string
	Open, Gate time.Duration
}

// Shared is the state of a set of breakers and Retry-After gates that the
// replicas of a service publish to each other through a Store (Redis):
// "name's breaker opened, skip it for d", "name's breaker closed again",
// "name's provider asked for no request for d". It is safe for concurrent
// use. Build one with NewShared; a chain builds its own (see
// chain.Builder.Shared).
//
// It shares decisions, not requests: every replica keeps its own Breaker,
// and no lock is taken across a model call (gobreaker's
// DistributedCircuitBreaker holds a Redis lock for the whole of each
// request, which would serialize every replica's calls). A replica whose
// breaker opens publishes it (TakeChange, PublishOpen); the others read it
// before their next call (Load) and apply it to their own breakers and
// gates (OpenElsewhere, CloseElsewhere), which then skip the target,
// without a request, until it is closed again or the publication ends.
//
// What is read is applied by each replica within its own limits (see
// OpenElsewhere and CloseElsewhere): no publication holds a replica's
// target longer than that replica's 2 x OpenFor or MaxGate, however far
// ahead it ends.
//
// Every method that reads or writes is one round trip to the store,
// bounded by the Timeout. When the store fails, the method returns an error
// matching ErrSharedUnavailable, OnError and the Logger say so, and the
// store is left alone for ProbeEvery: the methods return that error at
// once meanwhile, without a round trip or an allocation.
type Shared struct {
	store   Store
	key     string
	timeout time.Duration
	health  *remote.Health
	base    time.Time
	// leftAlone is returned, without a round trip or an allocation, while
	// the store is left alone after a failure.
	leftAlone error
}

// NewShared returns the shared state the replicas whose store is on the
// same Redis key publish to each other, configured by opts. A store names
// one chain's state, such as "backstop:" + chain + ":breakers".
// NewShared makes no round trip: the store may be down when it is called.
//
// Errors match ErrInvalidConfig and name what to change: a nil store, a
// store with an empty key, a negative Timeout or ProbeEvery.
func NewShared(store Store, opts SharedConfig) (*Shared, error) {
	found := problems.New(errHead)
	var key string
	if store == nil {
		found.Addf("shared state: store is nil; build one on Redis with redisstore.NewShared(client), then its Breakers(key)")
	} else if key = store.Key(); key == "" {
		found.Addf(`shared state: key is empty; name it, one per chain, such as "backstop:" + chain + ":breakers"`)
	}
	if opts.Timeout < 0 {
		found.Addf("shared state: Timeout is %v; it must not be negative (0 means %v)", opts.Timeout, DefaultSharedTimeout)
	}
	if opts.ProbeEvery < 0 {
		found.Addf("shared state: ProbeEvery is %v; it must not be negative (0 means %v)", opts.ProbeEvery, DefaultProbeEvery)
	}
	if err := found.Err(); err != nil {
		return nil, err
	}
	s := &Shared{
		store:   store,
		key:     key,
		timeout: opts.Timeout,
		base:    time.Now(),
	}
	if s.timeout == 0 {
		s.timeout = DefaultSharedTimeout
	}
	probe := opts.ProbeEvery
	if probe == 0 {
		probe = DefaultProbeEvery
	}
	s.health = remote.NewHealth("shared breaker state", key, probe, opts.OnError, opts.Logger)
	s.leftAlone = fmt.Errorf("%w: key %q: Redis failed recently; the next try is after ProbeEvery (%v)", ErrSharedUnavailable, key, probe)
	return s, nil
}

// Round trips of run.
const (
	opLoad byte = iota
	opOpen
	opClosed
	opGate
)

// Load returns what the replicas have published that has not ended yet:
// one Remote per name with an open breaker or a closed gate, in no
// particular order. While the store is left alone after a failure it
// returns an error matching ErrSharedUnavailable at once.
func (s *Shared) Load(ctx context.Context) ([]Remote, error) {
	return s.run(ctx, opLoad, "", 0)
}

// PublishOpen tells the other replicas that name's breaker is open and to
// skip it for d (rounded up to a millisecond); a publication that ends
// later is kept. Each replica skips it for at most twice its own OpenFor.
func (s *Shared) PublishOpen(ctx context.Context, name string, d time.Duration) error {
	_, err := s.run(ctx, opOpen, name, d)
	return err
}

// PublishClosed tells the other replicas that name's breaker closed: they
// stop skipping it from their next Load.
func (s *Shared) PublishClosed(ctx context.Context, name string) error {
	_, err := s.run(ctx, opClosed, name, 0)
	return err
}

// PublishGate tells the other replicas that name's provider asked for no
// request for d (rounded up to a millisecond); a closure that ends later
// is kept. Each replica closes its gate for at most its own MaxGate.
func (s *Shared) PublishGate(ctx context.Context, name string, d time.Duration) error {
	_, err := s.run(ctx, opGate, name, d)
	return err
}

// Available reports whether the store answered the last round trip.
func (s *Shared) Available() bool { return s.health.Available() }

// Slack is how far apart two readings of one publication's end may be,
// when each is estimated as the time Load returned plus the time it says is
// left: one round trip (the Timeout bounds it) and the millisecond Redis
// rounds to. OpenElsewhere and CloseElsewhere apply a publication once,
// however often it is read, by it.
func (s *Shared) Slack() time.Duration { return s.timeout + time.Millisecond }

// Changes returns how many state changes b has made: read it before Load,
// and pass it to OpenElsewhere with what Load read. A disabled breaker
// makes none.
func (s *Shared) Changes(b *Breaker) uint64 { return b.changes.Load() }

// OpenElsewhere records that another replica published b open until until
// (as Load read it): while b is closed, Allow refuses every attempt with
// ErrOpenElsewhere (which matches ErrOpen), without a request, so the
// replicas skip a target that one of them found failing. Once b is open or
// half-open itself, its own state decides, so that its probe is sent.
// until is this replica's estimate, now + the time Load says is left; it
// should come from time.Now (a monotonic reading).
//
// What another replica published is capped by b's own limit: it holds b
// open until the earlier of until and twice b's OpenFor after it first read
// the publication (a publisher's OpenFor, then the time its probe takes).
// The same publication read again does not extend it, so re-reading cannot
// stretch the cap: a reading whose until is within Slack of the last
// publication applied is that publication. A reading whose end differs by
// more is a new publication (the publisher's probe failed and it opened
// again, say): it replaces the last, capped afresh.
//
// asOf is what Changes returned before the publication was read: if b has
// changed state since (its own probe closed it, say, while the read was on
// its way), the publication is older news than b's own and is ignored; so
// is it after any later change. A zero until means the read found none: it
// ends the last at once (the replica that opened it found the target
// healthy again). A disabled breaker ignores it all.
func (s *Shared) OpenElsewhere(b *Breaker, until time.Time, asOf uint64) {
	b.openElsewhere(until, asOf, s.Slack())
}

// CloseElsewhere applies to g a closure another replica published: its
// provider asked for no request until until, as this replica estimates it
// (now + the time Load says is left; from time.Now, so that it carries a
// monotonic reading). g's Refusal tells it apart from a closure of this
// replica's own (ErrGateClosedElsewhere).
//
// What another replica asked for is capped by this replica's own limit
// (its MaxGate; 0 or less means DefaultMaxGate), measured from when this
// replica first read the publication: the gate closes until the earlier of
// until and now + limit. The same publication read again does not close it
// again, so re-reading cannot stretch the cap: a reading whose until is
// within Slack of the last publication applied is that publication. A
// reading whose end differs by more is a new closure (a new 429): it is
// applied afresh, capped again. A gate already closed until later stays
// closed until then.
func (s *Shared) CloseElsewhere(g *Gate, until time.Time, limit time.Duration) {
	g.closeUntilElsewhere(until, limit, s.Slack())
}

// TakeChange returns b's last state change that has not been taken yet, at
// most once: to publish it to the other replicas after the attempt that
// caused it (OnStateChange runs under gobreaker's lock, where no round trip
// belongs). It costs one atomic load when there is none; a disabled breaker
// has none.
func (s *Shared) TakeChange(b *Breaker) (State, bool) { return b.takeChange() }

// run makes one round trip to the store, bounded by the Timeout, unless the
// store is left alone, and logs the repair the store reports.
func (s *Shared) run(ctx context.Context, op byte, name string, d time.Duration) ([]Remote, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := int64(time.Since(s.base))
	if use, _ := s.health.Use(now); !use {
		return nil, s.leftAlone
	}
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	var (
		rs       []Remote
		repaired string
		err      error
	)
	switch op {
	case opLoad:
		rs, repaired, err = s.store.Load(tctx)
	case opOpen:
		repaired, err = s.store.PublishOpen(tctx, name, d)
	case opClosed:
		repaired, err = s.store.PublishClosed(tctx, name)
	default:
		repaired, err = s.store.PublishGate(tctx, name, d)
	}
	if err == nil {
		cancel()
		s.health.Succeeded()
		if repaired != "" {
			s.health.Repaired(repaired)
		}
		return rs, nil
	}
	cerr, timedOut := remote.Blame(ctx, tctx, err)
	cancel()
	if cerr != nil { // says nothing about Redis
		return nil, fmt.Errorf("shared state %q: %w (%v)", s.key, cerr, err)
	}
	if timedOut {
		err = fmt.Errorf("%w: key %q: no answer from Redis within the Timeout (%v): %w", ErrSharedUnavailable, s.key, s.timeout, err)
	} else {
		err = fmt.Errorf("%w: key %q: %w", ErrSharedUnavailable, s.key, err)
	}
	s.health.Failed(int64(time.Since(s.base)), err)
	return nil, err
}

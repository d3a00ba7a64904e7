package breaker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/internal/remote"
)

// Defaults of SharedConfig's zero fields.
const (
	// defaultSharedTimeout bounds each round trip of a Shared to its store
	// when SharedConfig.Timeout is 0.
	defaultSharedTimeout = 50 * time.Millisecond
	// defaultProbeEvery is how long a Shared leaves its store alone after a
	// failure when SharedConfig.ProbeEvery is 0.
	defaultProbeEvery = time.Second
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
// (redisstore.Store.Breakers); Shared owns everything else: the Timeout of
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
// logs it again at each probe that finds it. What Load returns is a type
// internal to the module, so redisstore's is the one implementation
// outside its tests.
type Store interface {
	// Key names the state in errors and log records: the Redis key.
	Key() string
	// Load returns what has been published and has not ended: one remote.Published
	// per name with an open breaker or a closed gate, in no particular
	// order, each duration what is left on the store's clock, positive.
	Load(ctx context.Context) (published []remote.Published, repaired string, err error)
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
	// context. 0 means 50ms; negative is an error.
	Timeout time.Duration
	// ProbeEvery is how long the store is left alone after a failure:
	// until then every method returns ErrSharedUnavailable at once; then
	// one call tries the store again. 0 means 1s;
	// negative is an error.
	ProbeEvery time.Duration
	// OnError, when set, is called each time the store becomes
	// unavailable, with an error matching ErrSharedUnavailable, and each
	// time it answers again, with nil. It runs on the calling goroutine:
	// keep it quick.
	OnError func(err error)
	// Refresh is how often the poller (one goroutine, running while calls
	// come: see Fresh) reads the other replicas' breakers and gates. 0
	// means 100ms; negative is an error.
	Refresh time.Duration
	// Logger receives a Warn record "backstop: shared breaker state
	// unavailable, using local state" and an Info record "backstop: shared
	// breaker state available again, using shared state" at the same
	// moments. nil means slog.Default() at the time of the record.
	Logger *slog.Logger
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
// request, which would serialize every replica's calls). Each replica
// gives its Shared its breakers and gates (Track); a replica whose breaker
// opens publishes it after the attempt that opened it (Publish); the
// others read it before their next call and apply it to their own
// breakers and gates (Sync), which then skip the target, without a
// request, until it is closed again or the publication ends. A Retry-After
// is published with PublishGate.
//
// What is read is applied by each replica within its own limits (see
// Sync): no publication holds a replica's target longer than that
// replica's 2 x OpenFor (the cap of its open interval) or MaxGate, however
// far ahead it ends.
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
	// tracked is what Track was given, replaced whole under trackMu.
	tracked atomic.Pointer[[]*tracked]
	trackMu sync.Mutex
	// poller keeps the tracked breakers and gates in step with the store
	// while calls come (see Fresh).
	poller poller
}

// NewShared returns the shared state the replicas whose store is on the
// same Redis key publish to each other, configured by opts. A store names
// one chain's state, such as "backstop:" + chain + ":breakers".
// NewShared makes no round trip: the store may be down when it is called.
//
// Errors wrap llm.ErrInvalidConfig and name what to change: a nil store, a
// store with an empty key, a negative Timeout or ProbeEvery.
func NewShared(store Store, opts SharedConfig) (*Shared, error) {
	found := problems.In(errHead, "shared state")
	var key string
	if store == nil {
		found.Addf("store is nil; build one on Redis with redisstore.New(client), then its Breakers(key)")
	} else if key = store.Key(); key == "" {
		found.Addf(`key is empty; name it, one per chain, such as "backstop:" + chain + ":breakers"`)
	}
	problems.NotNegative(found, "Timeout", opts.Timeout, defaultSharedTimeout)
	problems.NotNegative(found, "ProbeEvery", opts.ProbeEvery, defaultProbeEvery)
	problems.NotNegative(found, "Refresh", opts.Refresh, defaultRefresh)
	if err := found.Err(); err != nil {
		return nil, err
	}
	s := &Shared{
		store:   store,
		key:     key,
		timeout: cmp.Or(opts.Timeout, defaultSharedTimeout),
		base:    time.Now(),
	}
	s.poller = poller{s: s, refresh: cmp.Or(opts.Refresh, defaultRefresh), timeout: s.timeout, base: s.base, kick: make(chan struct{}, 1)}
	probe := cmp.Or(opts.ProbeEvery, defaultProbeEvery)
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
// one remote.Published per name with an open breaker or a closed gate, in no
// particular order. While the store is left alone after a failure it
// returns an error matching ErrSharedUnavailable at once.
func (s *Shared) Load(ctx context.Context) ([]remote.Published, error) {
	return s.run(ctx, opLoad, "", 0, false)
}

// PublishOpen tells the other replicas that name's breaker is open and to
// skip it for d (rounded up to a millisecond); a publication that ends
// later is kept. Each replica skips it for at most twice its own OpenFor
// (the cap of its open interval).
func (s *Shared) PublishOpen(ctx context.Context, name string, d time.Duration) error {
	_, err := s.run(ctx, opOpen, name, d, false)
	return err
}

// PublishClosed tells the other replicas that name's breaker closed: they
// stop skipping it from their next Load.
func (s *Shared) PublishClosed(ctx context.Context, name string) error {
	_, err := s.run(ctx, opClosed, name, 0, false)
	return err
}

// PublishGate tells the other replicas that name's provider asked for no
// request for d (rounded up to a millisecond); a closure that ends later
// is kept. Each replica closes its gate for at most its own MaxGate.
func (s *Shared) PublishGate(ctx context.Context, name string, d time.Duration) error {
	_, err := s.run(ctx, opGate, name, d, false)
	return err
}

// Available reports whether the store answered the last round trip.
func (s *Shared) Available() bool { return s.health.Available() }

// slackBound is how far apart two readings of one publication's end may be,
// when each is estimated as the time Load returned plus the time it says is
// left: one round trip (the Timeout bounds it) and the millisecond Redis
// rounds to. Sync applies a publication once, however often it is read, by
// it.
func (s *Shared) slackBound() time.Duration { return s.timeout + time.Millisecond }

// tracked is one breaker and gate a Shared shares, under its name.
type tracked struct {
	name    string
	b       *Breaker
	g       *Gate
	maxGate time.Duration
	// unpublished is the change of b (State+1) the store did not take, or
	// that PublishLater kept, to tell at the next Sync, Poll or Flush; 0
	// when there is none.
	unpublished atomic.Int32
	// gateUntil is when the gate closure PublishGateLater kept ends, in
	// nanoseconds since the Shared's base, to tell at the next Sync, Poll
	// or Flush; 0 when there is none.
	gateUntil atomic.Int64
}

// Track makes s share b and g under name (a chain's target's name): Sync
// applies to them what the other replicas published about name, Publish
// tells the others of b's changes, and Flush tells them what the store did
// not take. g closes for at most maxGate on another replica's word (0 or
// less means 15m): this replica's own limit, its Config.MaxGate.
// b or g may be nil, to share only the other.
//
// A tracked breaker's openings are lengthened at random, by up to
// a quarter (jitterShare), so that replicas whose breakers opened together do not
// all probe (see Sync).
//
// Track each name once, before the calls that use it; a chain tracks each
// of its targets when it is built. Track makes no round trip and is safe
// for concurrent use with every other method.
func (s *Shared) Track(name string, b *Breaker, g *Gate, maxGate time.Duration) {
	s.trackMu.Lock()
	defer s.trackMu.Unlock()
	var all []*tracked
	if p := s.tracked.Load(); p != nil {
		all = append(all, *p...)
	}
	if b != nil {
		b.jitter.Store(true) // see JitterShare
		b.shared = s
	}

	all = append(all, &tracked{name: name, b: b, g: g, maxGate: maxGate})
	s.tracked.Store(&all)
}

// tracks returns what Track was given, in order.
func (s *Shared) tracks() []*tracked {
	if p := s.tracked.Load(); p != nil {
		return *p
	}
	return nil
}

// Sync reads what the other replicas published (one Load) and applies it
// to every tracked breaker and gate, each within this replica's own limits:
//
//   - a published opening holds a closed breaker open, refusing attempts
//     with ErrOpenElsewhere, until the earlier of its end and twice the
//     breaker's OpenFor (the cap of its open interval, not the current
//     interval: the publisher's may have grown longer than this replica's
//     next opening) from when this replica first read it; once the
//     breaker is open or half-open itself, its own state decides, so that
//     its probe is sent. A breaker that changed state while the read was
//     on its way ignores what was read: its own news is fresher. A name
//     with no opening read ends the one applied before (the replica that
//     opened it found the target healthy again).
//   - a breaker open itself defers its probe to another replica when the
//     opening read ends later than this breaker's own publication (its
//     opening's end plus its interval) by more than slackBound: it stays open,
//     refusing attempts with ErrOpenElsewhere and its active probe (StartProbing) with ErrOpen,
//     until that publication is withdrawn or ends (capped as above), and
//     then probes itself. Replicas whose breakers opened on their own (a
//     total outage trips them all within one Refresh) thus send one probe
//     between them, the one whose opening ends last; a tracked breaker's
//     openings are lengthened at random (jitterShare) so that openings
//     that began together do not end within slackBound of each other.
//   - a published gate closure closes the gate (ErrGateClosedElsewhere)
//     until the earlier of its end and the tracked maxGate from when this
//     replica first read it.
//
// A publication read again is the same publication when its end is within
// slackBound of the last one applied: it extends nothing, so re-reading cannot
// stretch a cap. One whose end differs by more (the publisher's probe
// failed and it opened again, say; a new 429) is applied afresh.
//
// When the read succeeds, Sync first tells again each change Publish could
// not (see Publish), and a closing that the store takes now overrides the
// opening just read. Sync returns the read's error (matching
// ErrSharedUnavailable when the store failed or is left alone): the
// breakers and gates then keep what this replica knows. A change told
// again that the store does not take either is kept for the next Sync or
// Flush, and not reported.
func (s *Shared) syncOnce(ctx context.Context) error { return s.sync(ctx, false) }

// Poll is Sync for the one goroutine that keeps a replica's breakers and
// gates in step with the store in the background (a shared chain's; see
// chain.SharedConfig.Refresh): it tries the store even while it is left
// alone after a failure, so that one slow round trip costs the replica
// one Refresh of freshness, not ProbeEvery, and it first tells the store
// what PublishLater and PublishGateLater kept. It records the outcome as
// every round trip does: Available, OnError and the Logger say when the
// store fails and when it answers again.
func (s *Shared) pollOnce(ctx context.Context) error { return s.sync(ctx, true) }

func (s *Shared) sync(ctx context.Context, force bool) error {
	if force {
		if err := s.tellKept(ctx, true); err != nil {
			return err
		}
	}
	ts := s.tracks()
	// Each breaker's count of state changes, taken before the read: a
	// breaker that changes while the read is on its way ignores what was
	// read.
	var buf [8]uint64
	asOf := buf[:0]
	for _, t := range ts {
		var n uint64
		if t.b != nil {
			n = t.b.changes.Load()
		}
		asOf = append(asOf, n)
	}
	remotes, err := s.run(ctx, opLoad, "", 0, force)
	if err != nil {
		return err
	}
	at := time.Now()
	slack := s.slackBound()
	for i, t := range ts {
		var r remote.Published
		for _, x := range remotes {
			if x.Name == t.name {
				r = x
				break
			}
		}
		if u := t.unpublished.Swap(0); u != 0 {
			// A change this replica could not tell the others: the store
			// answers again, so tell them now. A withdrawal that lands
			// makes the publication just read stale.
			if to := State(u - 1); s.tell(ctx, t, to, true) == nil && to == Closed {
				r.Open = 0
			}
		}
		if t.b != nil {
			if r.Open > 0 {
				t.b.openElsewhere(at.Add(r.Open), asOf[i], slack)
			} else {
				t.b.openElsewhere(time.Time{}, 0, slack)
			}
		}
		if t.g != nil && r.Gate > 0 {
			t.g.closeUntilElsewhere(at.Add(r.Gate), t.maxGate, slack)
		}
	}
	return nil
}

// Publish tells the other replicas of b's last state change, if it made
// one since the last Publish: opened (skip it for twice b's current open
// interval, b.OpenInterval: that interval, then the time this replica's
// probe takes; a failed probe doubles the interval, up to OpenFor, and is
// published again) or closed (stop skipping it). A half-open breaker
// publishes nothing: the others keep skipping it while this replica
// probes. Call it after reporting an attempt's outcome to b, an active
// probe's included (its OnStateChange runs under gobreaker's lock, where
// no round trip belongs); it costs one atomic load when b made no change,
// and ignores a breaker that was not given to Track.
//
// The round trip does not end with ctx (a canceled call still tells the
// others); the Timeout bounds it. A change the store did not take is kept
// and told again by the next Sync whose read the store answers, or by
// Flush: a lost withdrawal would otherwise have every replica skip a
// healthy target until the publication ends. Publish returns that round
// trip's error; nil when the store took the change or there was none.
func (s *Shared) publish(ctx context.Context, b *Breaker) error {
	if b == nil || b.cb == nil || b.change.Load() == 0 {
		return nil
	}
	t := s.trackOf(b)
	if t == nil {
		return nil
	}
	to, ok := b.takeChange()
	if !ok {
		return nil
	}
	return s.tell(ctx, t, to, false)
}

// PublishLater is Publish without the round trip: it takes b's last state
// change, if it made one since the last Publish, and keeps it for the next
// Poll (or Sync, or Flush) to tell the store, a newer change replacing an
// older one, and wakes the poller (see Fresh) to tell it at once. It
// reports whether anything is kept to tell. It costs one atomic load when
// b made no change.
func (s *Shared) publishLater(b *Breaker) bool {
	if b == nil || b.cb == nil || b.change.Load() == 0 {
		return false
	}
	t := s.trackOf(b)
	if t == nil {
		return false
	}
	to, ok := b.takeChange()
	if !ok || to == HalfOpen {
		return false
	}
	t.unpublished.Store(int32(to) + 1)
	s.poller.wake()
	return true
}

// PublishGateLater is PublishGate without the round trip: it keeps the
// closure of name's gate for d from now, the later of it and one kept
// already, for the next Poll (or Sync, or Flush) to tell the store, with
// what is left of d then, and wakes the poller to tell it at once. It
// reports whether name is tracked.
func (s *Shared) PublishGateLater(name string, d time.Duration) bool {
	for _, t := range s.tracks() {
		if t.name != name {
			continue
		}
		until := max(int64(time.Since(s.base)+d), 1)
		for {
			cur := t.gateUntil.Load()
			if cur >= until || t.gateUntil.CompareAndSwap(cur, until) {
				s.poller.wake()
				return true
			}
		}
	}
	return false
}

// tellKept tells the store what PublishLater and PublishGateLater kept,
// and what it did not take before, stopping at the first round trip it
// does not take (what is left stays kept). force tries the store even
// while it is left alone.
func (s *Shared) tellKept(ctx context.Context, force bool) error {
	for _, t := range s.tracks() {
		if u := t.unpublished.Swap(0); u != 0 {
			if err := s.tellForced(ctx, t, State(u-1), true, force); err != nil {
				return err
			}
		}
		if until := t.gateUntil.Swap(0); until != 0 {
			left := time.Duration(until) - time.Since(s.base)
			if left <= 0 {
				continue
			}
			if _, err := s.run(context.WithoutCancel(ctx), opGate, t.name, left, force); err != nil {
				t.gateUntil.CompareAndSwap(0, until) // unless a newer one was kept meanwhile
				return err
			}
		}
	}
	return nil
}

// Flush tells the other replicas every change of a tracked breaker that the
// store did not take when Publish (or Sync) told it: call it before a
// replica stops. It returns the errors of the changes the store did not
// take this time either (each kept to be told again), joined, each naming
// the tracked name and the state; nil when everything was told.
func (s *Shared) Flush(ctx context.Context) error {
	var errs []error
	for _, t := range s.tracks() {
		if u := t.unpublished.Swap(0); u != 0 {
			to := State(u - 1)
			if err := s.tell(ctx, t, to, true); err != nil {
				errs = append(errs, fmt.Errorf("target %q: its breaker's change to %v was not published: %w", t.name, to, err))
			}
		}
		if until := t.gateUntil.Swap(0); until != 0 {
			if left := time.Duration(until) - time.Since(s.base); left > 0 {
				if err := s.PublishGate(ctx, t.name, left); err != nil {
					t.gateUntil.CompareAndSwap(0, until)
					errs = append(errs, fmt.Errorf("target %q: its gate's closure was not published: %w", t.name, err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// tell publishes that t's breaker changed to to, and returns the round
// trip's error. A change the store did not take is kept in t.unpublished.
// again is true when the change is one told before: it is kept only if no
// newer one was meanwhile.
func (s *Shared) tell(ctx context.Context, t *tracked, to State, again bool) error {
	return s.tellForced(ctx, t, to, again, false)
}

// tellForced is tell; force tries the store even while it is left alone.
func (s *Shared) tellForced(ctx context.Context, t *tracked, to State, again, force bool) error {
	ctx = context.WithoutCancel(ctx) // a canceled call still tells the others
	var err error
	switch to {
	case Open:
		// The current interval, then as long again for the probe. A change
		// told again late publishes the interval of the breaker's opening
		// at that time: the last one, as a later change overrides.
		d := t.b.openInterval()
		d += min(d, math.MaxInt64-d)
		if _, err = s.run(ctx, opOpen, t.name, d, force); err == nil {
			t.b.published(d)
		}
	case Closed:
		_, err = s.run(ctx, opClosed, t.name, 0, force)
	default:
		return nil // half-open: nothing to tell
	}
	switch {
	case err == nil:
		t.unpublished.Store(0) // told: an older change still kept is stale
	case again:
		t.unpublished.CompareAndSwap(0, int32(to)+1)
	default:
		t.unpublished.Store(int32(to) + 1)
	}
	return err
}

// run makes one round trip to the store, bounded by the Timeout, unless the
// store is left alone, and logs the repair the store reports.
func (s *Shared) run(ctx context.Context, op byte, name string, d time.Duration, force bool) ([]remote.Published, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := int64(time.Since(s.base))
	if use, _ := s.health.Use(now); !use && !force {
		return nil, s.leftAlone
	}
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	var (
		rs       []remote.Published
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
		err = fmt.Errorf("%w: key %q: no answer from Redis within the Timeout (%v): %w", ErrSharedUnavailable, s.key, s.timeout, remote.Late(err))
	} else {
		err = fmt.Errorf("%w: key %q: %w", ErrSharedUnavailable, s.key, err)
	}
	s.health.Failed(int64(time.Since(s.base)), err)
	return nil, err
}

// trackOf returns what Track keeps of b; nil when b was not given to it.
func (s *Shared) trackOf(b *Breaker) *tracked {
	for _, x := range s.tracks() {
		if x.b == b {
			return x
		}
	}
	return nil
}

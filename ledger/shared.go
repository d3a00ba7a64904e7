package ledger

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/internal/remote"
)

// Defaults of SharedConfig's zero fields.
const (
	// defaultTimeout bounds each operation of a Shared when
	// SharedConfig.Timeout is 0 (see there for why 250ms).
	defaultTimeout = 250 * time.Millisecond
	// defaultProbeEvery is how long a Shared leaves Redis alone after a
	// failure when SharedConfig.ProbeEvery is 0.
	defaultProbeEvery = time.Second
	// defaultMaxPending bounds the Finishes a Shared keeps for Redis when
	// SharedConfig.MaxPending is 0.
	defaultMaxPending = 1000
	// drainPerOp is how many other keys' pending Finishes an operation
	// Redis answered writes after its own, within its Timeout.
	drainPerOp = 8
)

// errSharedHead begins every configuration problem of NewShared.
var errSharedHead = problems.Head("ledger: invalid configuration")

// SharedConfig configures NewShared. The zero value means every default.
type SharedConfig struct {
	// Timeout bounds each Begin, Finish and Get, on top of the caller's
	// context, all its round trips together: a slow or unreachable Redis
	// costs an operation at most this long, after which it fails with
	// ErrUnavailable. 0 means 250ms; negative is an error.
	//
	// 250ms, as a money budget's (spend.SharedConfig.Timeout), rather
	// than the breakers' 50ms: a ledger has no local answer to fall back
	// on, so a round trip that times out on a healthy but busy Redis (a
	// burst queued behind the client's connections) refuses the agent
	// step, and a Begin that timed out after Redis applied it leaves the
	// key started by an owner that never ran the tool, read as outcome
	// unknown once its lease ends. 250ms is small beside the model call
	// every tool step waits for, and is paid only by the operations under
	// way when Redis stops answering.
	Timeout time.Duration
	// ProbeEvery is how long Redis is left alone after it failed: until
	// then every operation fails at once with ErrUnavailable (but for the
	// keys this process finished, see Shared), and no round trip is
	// tried; then one operation tries Redis again. 0 means 1s; negative
	// is an error.
	ProbeEvery time.Duration
	// MaxPending is how many Finishes that Redis did not take a Shared
	// keeps in process, to write once it answers again (see Shared). 0
	// means 1000; negative is an error. A Finish beyond it fails with
	// ErrUnavailable: its key reads started until its lease ends, then
	// outcome unknown.
	MaxPending int
	// OnError, when set, is called each time Redis becomes unavailable,
	// with an error matching ErrUnavailable that wraps the cause, and
	// each time it answers again, with nil: feed a metric with it. It runs
	// on the goroutine whose operation saw the change, so keep it quick.
	OnError func(err error)
	// Available, when set, is asked before each round trip: while it
	// reports false, operations fail with ErrUnavailable without trying
	// Redis, as when the Shared's own health says Redis is down. Pass the
	// Available of another shared store on the same Redis so that a Redis
	// that failed it costs an agent step no Timeout.
	Available func() bool
	// Logger receives a Warn record "backstop: shared ledger unavailable,
	// refusing side effects until it answers" each time Redis becomes
	// unavailable, an Info record "backstop: shared ledger available
	// again, using shared state" each time it answers again, a Warn
	// record each time the store repairs a key that held something else,
	// and one each time a pending Finish is refused because another owner
	// took its key over. nil means slog.Default() at the time of the
	// record.
	Logger *slog.Logger
}

// Shared is a Ledger kept in another Ledger that the replicas of a service
// share, on Redis (redisstore.Store.Ledger), so that a slow Redis never
// holds an agent step longer than the Timeout, and a Redis that is down
// never lets a side effect run blind. It is safe for concurrent use. Build
// one with NewShared; the zero value is not usable.
//
// While Redis answers, every Begin, Finish and Get is made on it, each
// bounded by the Timeout: a tool call that runs costs 2 round trips
// (Begin and Finish), one that replays a done result 1.
//
// When Redis fails or does not answer within the Timeout, that operation
// and every one for the next ProbeEvery return an error matching
// ErrUnavailable (wrapping the cause) at once, without a round trip; then
// one operation tries Redis again. OnError and the Logger say when Redis
// becomes unavailable and when it answers again. The rule: a ledger that
// cannot be asked must not let a side effect run blind, so no Begin is
// answered locally, and an agent step whose Begin fails does not run its
// tool; its caller sees the error and may retry later. The key is
// unchanged, so the retry is still exactly once. The caller's own context
// ending is returned as its error, and says nothing of Redis.
//
// A Finish that Redis did not take (it failed, timed out, or is being
// left alone) is not lost: the Shared keeps it in process (up to
// MaxPending, whatever the caller's context) and returns nil; Begin and
// Get on its key answer Done with its result from process memory while
// Redis does not answer, and the next operation Redis answers writes it
// first (and up to 8 other keys' after its own), as does Flush. A
// pending Finish whose key another owner took over meanwhile (its lease
// ended first) is refused by Redis and dropped, with a Warn record: that
// owner's Recover has decided. If the process dies with Finishes
// pending, their keys read started until their leases end, then outcome
// unknown, and the tool's Recover decides; nothing is re-run blind.
//
// A Begin that timed out after Redis applied it leaves the key started by
// its owner, who was told ErrUnavailable and did not run the tool: a
// retry finds the key started (a concurrent duplicate) until the lease
// ends, then outcome unknown, and Recover should find nothing done.
//
// A Shared starts no goroutine of its own and holds nothing to close: the
// store and its client are the caller's.
type Shared struct {
	store      Ledger
	timeout    time.Duration
	maxPending int
	health     *remote.Health // on the clock of now
	available  func() bool    // SharedConfig.Available; nil: always
	logger     *slog.Logger
	base       time.Time // monotonic origin of now

	mu      sync.Mutex
	pending map[string]*pendingFinish
}

var _ Ledger = (*Shared)(nil)

// pendingFinish is a Finish Redis has yet to take.
type pendingFinish struct {
	owner   string
	result  []byte
	ttl     time.Duration
	writing bool // a round trip is writing it
}

// NewShared returns a Ledger kept in store (on Redis:
// redisstore.Store.Ledger) while it answers, configured by cfg (the zero
// SharedConfig for every default); see Shared. Errors wrap
// llm.ErrInvalidConfig and name what to change: a nil store, a negative
// Timeout, ProbeEvery or MaxPending. NewShared makes no round trip: the
// store may be down when it is called.
func NewShared(store Ledger, cfg SharedConfig) (*Shared, error) {
	found := problems.In(errSharedHead, "shared ledger")
	if store == nil {
		found.Addf("store is nil; build one on Redis with redisstore.New(client), then its Ledger(name)")
	}
	problems.NotNegative(found, "Timeout", cfg.Timeout, defaultTimeout)
	problems.NotNegative(found, "ProbeEvery", cfg.ProbeEvery, defaultProbeEvery)
	problems.NotNegative(found, "MaxPending", cfg.MaxPending, defaultMaxPending)
	if err := found.Err(); err != nil {
		return nil, err
	}
	var key string
	if k, ok := store.(interface{ Key() string }); ok {
		key = k.Key()
	}
	return &Shared{
		store:      store,
		timeout:    cmp.Or(cfg.Timeout, defaultTimeout),
		maxPending: cmp.Or(cfg.MaxPending, defaultMaxPending),
		health: remote.NewHealth("shared ledger", key, cmp.Or(cfg.ProbeEvery, defaultProbeEvery), cfg.OnError, cfg.Logger).
			Saying("refusing side effects until it answers", "using shared state"),
		available: cfg.Available,
		logger:    cfg.Logger,
		base:      time.Now(),
		pending:   make(map[string]*pendingFinish),
	}, nil
}

// Begin asks Redis to record key started by owner (see Ledger), within the
// Timeout, after writing key's pending Finish if it has one. It returns an
// error matching ErrUnavailable when Redis is being left alone, fails or
// does not answer in time, and ctx's error when ctx ends first; then
// nothing may run. A key this process finished while Redis was unavailable
// is answered Done, with its result, from process memory.
func (s *Shared) Begin(ctx context.Context, key, owner string, lease time.Duration, takeover bool) (Entry, error) {
	var e Entry
	err := s.ask(ctx, key, func(tctx context.Context) (err error) {
		e, err = s.store.Begin(tctx, key, owner, lease, takeover)
		return err
	})
	return s.orPending(key, e, err)
}

// Get returns key's entry as Redis holds it, within the Timeout, after
// writing key's pending Finish if it has one; errors as Begin's, and a
// key this process finished while Redis was unavailable is answered Done
// from process memory.
func (s *Shared) Get(ctx context.Context, key string) (Entry, error) {
	var e Entry
	err := s.ask(ctx, key, func(tctx context.Context) (err error) {
		e, err = s.store.Get(tctx, key)
		return err
	})
	return s.orPending(key, e, err)
}

// Finish records key done with result on Redis, within the Timeout
// whatever ctx's cancellation (only its values are kept): the side effect
// has run, and its result must not be lost to a caller giving up. It
// returns ErrNotOwner (wrapped) when Redis says owner does not hold key.
// When Redis is being left alone, fails or does not answer in time, the
// Finish is kept in process to be written later (see Shared) and Finish
// returns nil; only when MaxPending Finishes are kept already does it
// return an error matching ErrUnavailable (the result is then not
// recorded: the key reads started, then outcome unknown).
func (s *Shared) Finish(ctx context.Context, key, owner string, result []byte, ttl time.Duration) error {
	ctx = context.WithoutCancel(ctx)
	result = bytes.Clone(result)
	err := s.ask(ctx, key, func(tctx context.Context) error {
		return s.store.Finish(tctx, key, owner, result, ttl)
	})
	if err == nil || errors.Is(err, ErrNotOwner) {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.pending[key]; p != nil || len(s.pending) < s.maxPending {
		s.pending[key] = &pendingFinish{owner: owner, result: result, ttl: ttl}
		return nil
	}
	return fmt.Errorf("%w: %d Finishes are pending already (MaxPending); key %q not recorded: %w",
		ErrUnavailable, s.maxPending, key, err)
}

// Available reports whether operations go to Redis: false from a failed
// round trip until one succeeds again.
func (s *Shared) Available() bool { return s.health.Available() }

// Pending returns how many Finishes this process keeps for Redis.
func (s *Shared) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}

// Flush writes the pending Finishes to Redis, one round trip each, each
// bounded by the Timeout, whether or not Redis is being left alone: call
// it before a replica stops, or in tests. It returns the failures, each
// matching ErrUnavailable (what failed stays pending), or ctx's error. A
// Finish Redis refuses (another owner took its key over) is dropped, as
// in Shared. Flush does not change whether Redis is considered available.
func (s *Shared) Flush(ctx context.Context) error {
	s.mu.Lock()
	keys := make([]string, 0, len(s.pending))
	for k := range s.pending {
		keys = append(keys, k)
	}
	s.mu.Unlock()
	var errs []error
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		tctx, cancel := context.WithTimeout(remote.WithRepair(ctx, s.health.RepairedKey), s.timeout)
		if _, err := s.write(tctx, k); err != nil {
			errs = append(errs, s.wrap(ctx, tctx, err))
		}
		cancel()
	}
	return errors.Join(errs...)
}

// ask runs op on the store, within the Timeout, after writing key's
// pending Finish, unless ctx has ended or Redis is being left alone; then
// writes a few other keys' pending Finishes. It records whether Redis
// answered. ErrNotOwner from op is an answer, returned as it is.
func (s *Shared) ask(ctx context.Context, key string, op func(context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !s.use() {
		return fmt.Errorf("%w: Redis failed recently; the next try is after ProbeEvery (%v)", ErrUnavailable, s.health.ProbeEvery())
	}
	tctx, cancel := context.WithTimeout(remote.WithRepair(ctx, s.health.RepairedKey), s.timeout)
	defer cancel() // after wrap, which asks tctx why the round trip ended
	_, err := s.write(tctx, key)
	if err == nil {
		err = op(tctx)
	}
	if err != nil && !errors.Is(err, ErrNotOwner) {
		err = s.wrap(ctx, tctx, err)
		if errors.Is(err, ErrUnavailable) { // not the caller's own end
			s.health.Failed(s.now(), err)
		}
		return err
	}
	s.health.Succeeded()
	s.drain(tctx, key)
	return err
}

// drain writes up to drainPerOp pending Finishes of keys other than key,
// under tctx; a failure keeps them for later.
func (s *Shared) drain(tctx context.Context, key string) {
	for range drainPerOp {
		s.mu.Lock()
		other := ""
		for k, p := range s.pending {
			if k != key && !p.writing {
				other = k
				break
			}
		}
		s.mu.Unlock()
		if other == "" || tctx.Err() != nil {
			return
		}
		if _, err := s.write(tctx, other); err != nil {
			return
		}
	}
}

// write writes key's pending Finish, if it has one that no other round
// trip is writing, and reports whether it had. A Finish Redis refuses
// (ErrNotOwner) is dropped: after a Get, silently when the key is done
// with this result by this owner (an earlier write that timed out after
// Redis applied it), with a Warn record otherwise. On another failure it
// stays pending.
func (s *Shared) write(ctx context.Context, key string) (bool, error) {
	s.mu.Lock()
	p := s.pending[key]
	if p == nil || p.writing {
		s.mu.Unlock()
		return false, nil
	}
	p.writing = true
	s.mu.Unlock()
	err := s.store.Finish(ctx, key, p.owner, p.result, p.ttl)
	if errors.Is(err, ErrNotOwner) {
		e, gerr := s.store.Get(ctx, key)
		if gerr != nil {
			err = gerr
		} else {
			if e.State != Done || e.Owner != p.owner || !bytes.Equal(e.Result, p.result) {
				s.log().Warn("backstop: shared ledger: a pending Finish was refused, the key is no longer held by its owner (taken over after its lease); its result is dropped",
					"key", key, "owner", p.owner, "state", e.State.String(), "held_by", e.Owner)
			}
			err = nil
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.writing = false
	if err != nil {
		return true, err
	}
	if s.pending[key] == p {
		delete(s.pending, key)
	}
	return true, nil
}

// orPending returns what Begin or Get answer for key, given the entry
// the store answered and the error: key's pending Finish as a Done entry
// when there is one and Redis did not answer (err matches
// ErrUnavailable), or answered the key started by the pending Finish's
// owner (another round trip is writing it); else e and err.
func (s *Shared) orPending(key string, e Entry, err error) (Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending[key]
	switch {
	case p != nil && (errors.Is(err, ErrUnavailable) || err == nil && e.State == Started && e.Owner == p.owner):
		return Entry{State: Done, Owner: p.owner, Result: bytes.Clone(p.result)}, nil
	case err != nil:
		return Entry{}, err
	}
	return e, nil
}

// wrap describes a failed round trip under tctx (ctx with the Timeout):
// the caller's own context error when ctx ended it, which says nothing
// about Redis; an error matching ErrUnavailable otherwise.
func (s *Shared) wrap(ctx, tctx context.Context, err error) error {
	cerr, timedOut := remote.Blame(ctx, tctx, err)
	switch {
	case cerr != nil:
		return fmt.Errorf("shared ledger: %w (%v)", cerr, err)
	case timedOut:
		return fmt.Errorf("%w: no answer from Redis within the Timeout (%v): %w", ErrUnavailable, s.timeout, remote.Late(err))
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// use reports whether a round trip may be tried: Health's say, unless
// Available says Redis is down.
func (s *Shared) use() bool {
	if s.available != nil && !s.available() {
		return false
	}
	use, _ := s.health.Use(s.now())
	return use
}

// now returns the time since s.base.
func (s *Shared) now() int64 { return int64(time.Since(s.base)) }

func (s *Shared) log() *slog.Logger {
	if s.logger != nil {
		return s.logger
	}
	return slog.Default()
}

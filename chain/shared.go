package chain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/retry"
)

// DefaultSharedPrefix begins every key of a shared chain when
// SharedConfig.Prefix is empty.
const DefaultSharedPrefix = "backstop"

// SharedConfig configures Builder.Shared. The zero value means every
// default.
type SharedConfig struct {
	// Prefix begins every key the chain writes: "<Prefix>:<chain>:breakers"
	// (one hash: the breakers and Retry-After gates of all its targets)
	// and "<Prefix>:<chain>:<target>:budget" (one hash per target's
	// budget). Empty means DefaultSharedPrefix ("backstop"). Replicas share
	// state when they build chains of the same name on the same Redis with
	// the same Prefix.
	Prefix string
	// Timeout bounds each Redis round trip. Calls make none to read the
	// breakers and gates (see Refresh); a call whose mirror is stale waits
	// for the poller's read at most about this long, and a retry or hedge
	// decision (one round trip to the shared budget) waits at most this
	// long, after which it goes on with this replica's own state. 0 means
	// 50ms; negative is an error.
	Timeout time.Duration
	// ProbeEvery is how long Redis is left alone after a failure by the
	// budgets' round trips: retry decisions make none meanwhile, then one
	// tries again. The poller tries again at its next Refresh. 0 means 1s;
	// negative is an error.
	ProbeEvery time.Duration
	// Refresh is how often this replica's poller (one goroutine per chain,
	// running while calls come and exiting after two idle Refreshes) reads
	// the other replicas' breakers and gates into this replica's own,
	// which calls then decide on without a round trip; breaker changes and
	// gate closures are written by the poller as soon as a call makes one.
	// A decision thus reflects what other replicas published at most
	// 2 x Refresh + 2 x Timeout ago (300ms by default; typically Refresh,
	// 100ms). A call whose mirror is older than 2 x Refresh + Timeout
	// (Redis did not answer) decides on local state, and says so (the
	// observe.Call SharedLocal event, the backstop.shared.local span
	// event). 0 means DefaultSharedRefresh (100ms): in a load test of 2
	// replicas, 50 concurrent callers and 2,000 calls on a loopback
	// redis-server, a read on every call made 1.07 Redis commands a call
	// and, in 4 of 14 runs, one timed-out read left 1,930-2,000 calls on
	// local state; the poller makes 0.025 a call and none local. Negative
	// is an error.
	Refresh time.Duration
	// Budget configures the shared retry budget of each target whose
	// Target.Budget is nil (a Target.Budget that is set is used as it is).
	// Zero fields mean budget's defaults: retries at most 10% of the first
	// attempts of all replicas together over 10s, with a floor of 10 per
	// window for all of them.
	Budget budget.RatioConfig
	// Hedge configures the shared hedge budget of each hedged tier (and
	// each target with its own Target.Hedge) whose hedge.Config.Budget is
	// nil, under "<Prefix>:<chain>:tier%3A<tier>:hedge" (or
	// "<Prefix>:<chain>:<target>:hedge"): all replicas together hedge at
	// most that share of their calls. A zero Ratio means
	// hedge.DefaultRatio (10%); the other zero fields budget's defaults.
	Hedge budget.RatioConfig
	// Logger receives a Warn record each time a shared store stops
	// answering and an Info record when it answers again. nil means
	// slog.Default().
	Logger *slog.Logger
}

// Store is where the replicas of a shared chain keep what they
// share, one key per store: redisstore.New builds one on a go-redis
// client (the redisstore package owns the module's go-redis code, so a
// chain that is not shared does not link it). Breakers is the store of the
// chain's breakers and Retry-After gates, Budget that of one target's
// retry budget; the chain names the keys (see SharedConfig.Prefix) and
// builds the breaker.Shared and budget.Shared that run on them.
type Store interface {
	Breakers(key string) breaker.Store
	Budget(key string) budget.Store
}

// Shared makes the replicas that build this chain (same name, same Redis,
// same Prefix) share what they learn about its targets through store,
// redisstore.New's on a go-redis client whose options set
// ContextTimeoutEnabled:
//
//   - retry budgets: each target whose Budget is nil gets a budget.Shared,
//     so all replicas together retry a failing target no more than one
//     budget allows (one round trip per retry decision);
//   - circuit breakers: when one replica's breaker opens, the others skip
//     the target from their next call on, until the replica that opened it
//     has sent its probe and found the target healthy (or, should that
//     replica be gone, twice each replica's own OpenFor has passed since it
//     read the publication); replicas whose breakers opened on their own
//     leave the probe to one of them, so a target is probed at most 12
//     times a minute by all replicas together; a call with nowhere else to
//     go waits for that replica's probe (breaker.Breaker.Wait);
//   - Retry-After gates: a Retry-After one replica does not wait out closes
//     the target on every replica, each for at most its own MaxGate.
//
// What a replica reads is applied once, within its own limits, however
// often it reads it again or however far ahead it ends (see
// breaker.Shared.Sync).
//
// Each replica keeps its own breakers; no lock is held across a model call.
// One poller per chain reads the breakers and gates every
// SharedConfig.Refresh (100ms) and writes what changed (a breaker opened or
// closed, a gate closed) as soon as a call changes it: calls make no Redis
// round trip for them. Call Chain.Close when the chain is done with (the
// poller also exits by itself two Refreshes after the last call, so a
// chain dropped without Close leaks nothing; but a test that builds one
// inside a testing/synctest bubble must Close it, with t.Cleanup(c.Close)
// registered after the Redis client's cleanup (so that it runs first),
// since the bubble's clock stops
// when its function returns and the poller would be left waiting). When
// Redis is slow or down, a call whose mirror is stale goes on with local
// state, the call's SharedLocal event, a log record and the metric
// backstop.shared.unavailable say so, and sharing resumes when Redis
// answers again. No call fails because of Redis.
//
// To share last-known-good answers too, give chain.LastGood a
// redisstore.NewCache store on the same client.
//
//	client := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.New(client)
//	...
//	c, err := chain.New("support-answer").Shared(store, chain.SharedConfig{}).Primary(...).Build()
//
// A nil store (one NewShared refused, say) is reported by Build.
func (b *Builder) Shared(store Store, opts SharedConfig) *Builder {
	b.shared = &sharedSetup{store: store, opts: opts}
	return b
}

type sharedSetup struct {
	store Store
	opts  SharedConfig
}

// DefaultSharedRefresh is how often a shared chain's poller reads the
// other replicas' breakers and gates, and so how stale what a call decides
// on may be, when SharedConfig.Refresh is 0.
const DefaultSharedRefresh = 100 * time.Millisecond

// shared is the chain's side of Builder.Shared: the mirror of the other
// replicas' breakers and gates (this replica's own breakers and gates,
// which breaker.Shared keeps in step with Redis), and the one goroutine
// that keeps it fresh, a poller that reads Redis every refresh while calls
// come, writes what the calls kept for it (PublishLater, PublishGateLater)
// as soon as they wake it, and exits once no call came for two refreshes.
type shared struct {
	state   *breaker.Shared
	refresh time.Duration
	timeout time.Duration // bounds each round trip; a call waits for the first read at most this long
	base    time.Time     // origin of the times below

	// read is when the running poller's last read that Redis answered
	// began, since base, +1; 0: none. A poller that stops resets it under
	// mu: nothing keeps the mirror in step until the next one runs, so
	// what its reads found counts for no call after it (the call that
	// starts the next waits for that one's first read).
	read atomic.Int64
	used atomic.Int64 // when a call last used the mirror, since base
	// waiting counts the calls waiting for a breaker's probe (another
	// replica's, perhaps): the poller keeps reading while there are any.
	waiting atomic.Int32

	kick chan struct{} // wakes the poller: something to write (buffered, 1)

	mu      sync.Mutex
	running bool
	polled  chan struct{} // closed when the poller's next read ends
	stop    chan struct{} // closed by close; nil while no poller runs
	done    sync.WaitGroup
}

// staleAfter is how old the mirror's last read may be before a call
// decides on local state: two refreshes (one read that failed, the next
// that answered) and a round trip.
func (s *shared) staleAfter() time.Duration { return 2*s.refresh + s.timeout }

func (s *shared) now() int64 { return int64(time.Since(s.base)) }

// fresh reports whether a read of the running poller that Redis answered
// began within staleAfter.
func (s *shared) fresh(now int64) bool {
	r := s.read.Load()
	return r != 0 && now-(r-1) <= int64(s.staleAfter())
}

// ensure starts the poller unless it runs, and returns the channel closed
// when its next read ends, and whether it was just started.
func (s *shared) ensure() (polled chan struct{}, started bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		s.running, started = true, true
		s.polled = make(chan struct{})
		s.stop = make(chan struct{})
		s.done.Add(1)
		go s.poll(s.stop)
	}
	return s.polled, started
}

// wake has the poller write what a call kept for it, at once.
func (s *shared) wake() {
	s.used.Store(s.now())
	s.ensure()
	select {
	case s.kick <- struct{}{}:
	default: // woken already
	}
}

// poll is the poller: a read (after the writes kept for it) every refresh
// or when woken, until no call used the mirror for two refreshes or close
// stops it.
func (s *shared) poll(stop chan struct{}) {
	defer s.done.Done()
	tick := time.NewTicker(s.refresh)
	defer tick.Stop()
	for {
		began := s.now()
		err := s.state.Poll(context.Background())
		s.mu.Lock()
		if stop != s.stop || !s.running {
			s.mu.Unlock()
			return // closed meanwhile: close closed polled and reset read
		}
		if err == nil {
			s.read.Store(began + 1)
		}
		close(s.polled)
		s.polled = make(chan struct{})
		s.mu.Unlock()
		select {
		case <-stop:
			return
		case <-s.kick:
			continue
		case <-tick.C:
		}
		s.mu.Lock()
		if stop != s.stop || !s.running {
			s.mu.Unlock()
			return // closed (and maybe restarted) while the tick fired
		}
		if s.now()-s.used.Load() > int64(2*s.refresh) && len(s.kick) == 0 && s.waiting.Load() == 0 {
			s.running = false // idle: the next call starts another
			s.read.Store(0)   // and waits for its first read
			close(s.polled)   // nobody waits for a read that will not come
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// settle waits, at most until ctx ends, for the poller's read in flight
// and the next, if it runs, so that what calls kept for it is written.
func (s *shared) settle(ctx context.Context) {
	for range 2 { // the read in flight may have begun before the writes were kept
		s.mu.Lock()
		running, polled := s.running, s.polled
		s.mu.Unlock()
		if !running {
			return
		}
		select {
		case <-polled:
		case <-ctx.Done():
			return
		}
	}
}

// close stops the poller, if one runs, and waits for it.
func (s *shared) close() {
	s.mu.Lock()
	if s.running {
		close(s.stop)
		close(s.polled)
		s.running = false
		s.read.Store(0)
	}
	s.mu.Unlock()
	s.done.Wait()
}

// buildShared checks the configuration and makes the chain's shared state
// and the shared budgets of the targets without one. problem reports a
// problem of the whole chain (target "") or of one target.
func (c *Chain) buildShared(cfg *sharedSetup, targets []*target, problem func(target, what string, err error)) {
	o := cfg.opts
	if o.Refresh < 0 {
		problem("", "Shared: Refresh is "+o.Refresh.String()+"; it must not be negative (0 means 100ms)", nil)
	}
	prefix := o.Prefix
	if prefix == "" {
		prefix = DefaultSharedPrefix
	}
	if err := o.Budget.Validate(); err != nil {
		problem("", "Shared: Budget is invalid", err)
	}
	if err := o.Hedge.Validate(); err != nil {
		problem("", "Shared: Hedge is invalid", err)
	}
	if cfg.store == nil {
		problem("", "Shared: the store is nil; build one with redisstore.New(client), and check its error", nil)
		return
	}
	notify := c.state // the callbacks below may outlive c: they hold its observers, not c
	breakers := cfg.store.Breakers(prefix + ":" + keyPart(c.name) + ":breakers")
	if breakers == nil {
		problem("", "Shared: the store builds no breaker store (a nil *redisstore.Store?); build one with redisstore.New(client), and check its error", nil)
		return
	}
	state, err := breaker.NewShared(breakers, breaker.SharedConfig{
		Timeout:    o.Timeout,
		ProbeEvery: o.ProbeEvery,
		Logger:     o.Logger,
		OnError: func(err error) {
			if err != nil {
				notify.sharedUnavailable("breaker", "")
			}
		},
	})
	if err != nil {
		problem("", "Shared is invalid", err)
		return
	}
	c.shared = &shared{state: state, refresh: cmp.Or(o.Refresh, DefaultSharedRefresh),
		timeout: cmp.Or(o.Timeout, breaker.DefaultSharedTimeout), base: time.Now(), kick: make(chan struct{}, 1)}
	for _, t := range targets {
		state.Track(t.Name, t.breaker, &t.gate, t.maxGate)
	}
	share := func(name, kind string, ratio budget.RatioConfig) (budget.Budget, error) {
		return budget.NewShared(cfg.store.Budget(prefix+":"+keyPart(c.name)+":"+keyPart(name)+":"+kind), budget.SharedConfig{
			Ratio:      ratio,
			Timeout:    o.Timeout,
			ProbeEvery: o.ProbeEvery,
			Available:  state.Available, // one Redis failure, one Timeout per call
			Logger:     o.Logger,
			OnError: func(err error) {
				if err != nil {
					notify.sharedUnavailable(kind, name)
				}
			},
		})
	}
	for _, t := range targets {
		if t.Budget != nil {
			continue
		}
		b, err := share(t.Name, "budget", o.Budget)
		if err != nil {
			problem(t.Name, "Shared: the target's shared budget", err)
			continue
		}
		t.budget = b
	}
	hedges := o.Hedge
	if hedges.Ratio == 0 {
		hedges.Ratio = hedge.DefaultRatio
	}
	shared := map[string]budget.Budget{} // one per key: a tier's targets share theirs
	for _, t := range targets {
		h := t.hedge
		if h == nil || h.shareKey == "" {
			continue
		}
		if b, ok := shared[h.shareKey]; ok {
			h.budget = b
			continue
		}
		b, err := share(h.shareKey, "hedge", hedges)
		if err != nil {
			problem(t.Name, "Shared: the shared hedge budget", err)
			continue
		}
		h.budget, shared[h.shareKey] = b, b
	}
}

// keyEscaper escapes the parts of a key that come from names, so that
// chain "eu:support" with target "primary" and chain "eu" with target
// "support:primary" get different keys.
var keyEscaper = strings.NewReplacer("%", "%25", ":", "%3A")

// keyPart is name as one part of a Redis key: its '%' and ':' escaped.
func keyPart(name string) string { return keyEscaper.Replace(name) }

// sync makes sure the call decides on a fresh mirror of what the other
// replicas published about the chain's targets: one the poller read
// within staleAfter. It costs no round trip while the poller runs; a call
// whose mirror is stale (the first after a pause, which starts the poller,
// and those that come during its first read) waits for the poller's read
// in flight (bounded by the Timeout, twice when it writes first), unless
// Redis is known to be down and the poller was running already.
// A call whose mirror is stale nonetheless decides on this replica's own
// state, and says so (obs.sharedLocal).
func (c *Chain) sync(ctx context.Context, obs *callObs) {
	s := c.shared
	now := s.now()
	s.used.Store(now)
	polled, started := s.ensure()
	if s.fresh(now) {
		return
	}
	if started || s.state.Available() {
		// The poller's read is bounded by the Timeout, and records a
		// failure before it ends; this bound is for its writes first.
		t := time.NewTimer(2*s.timeout + time.Millisecond)
		select {
		case <-polled:
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if s.fresh(s.now()) {
			return
		}
	}
	if ctx.Err() == nil {
		obs.sharedLocal()
	}
}

// settle reports the end of attempt a, at the time at, to its target's
// breaker (verdict v, under the attempt's ticket) and budget (success or
// not), and publishes a breaker change it caused to the other replicas.
func (c *Chain) settle(ctx context.Context, a *attempt, v retry.Verdict, success bool, at time.Time) {
	a.t.budget.Record(ctx, budget.Outcome{Retry: a.n > 1, Success: success, At: at})
	a.ticket.ReportAt(v, at) // as report does, one call fewer on every attempt's path
	if c.shared != nil {
		c.publish(ctx, a.t)
	}
}

// report tells t's breaker verdict v on the request sent under ticket,
// which ended at at, and the other replicas (through sh, the chain's
// shared state; nil when not shared) of a change it caused.
func report(ctx context.Context, sh *shared, t *target, ticket breaker.Ticket, v retry.Verdict, at time.Time) {
	ticket.ReportAt(v, at)
	if sh != nil {
		_ = sh.state.Publish(ctx, t.breaker)
	}
}

// publish tells the other replicas of a change of t's breaker: opened
// (skip t for twice its current open interval: that interval, then the
// time this replica's probe takes) or closed (stop skipping it). A half-open breaker publishes
// nothing: the others keep skipping t while this replica probes it. A
// change Redis did not take is told again by the next call whose read
// Redis answers, or by Flush (see breaker.Shared.Publish).
func (c *Chain) publish(ctx context.Context, t *target) {
	if c.shared.state.PublishLater(t.breaker) {
		c.shared.wake()
	}
}

// publishGate tells the other replicas that t's gate closed for d, through
// the poller.
func (c *Chain) publishGate(t *target, d time.Duration) {
	if c.shared.state.PublishGateLater(t.Name, d) {
		c.shared.wake()
	}
}

// Flush writes what the chain has not yet told Redis: the first attempts
// its shared retry and hedge budgets counted (they are written in batches) and any breaker
// change Redis did not take when it happened. It then waits for the answers
// its LastGood degradations are still writing behind their calls (see
// LastGood), shared chain or not, so that a replica that stops loses none
// of them. Call it before a replica stops; ctx bounds it all. It returns
// the errors of the round trips Redis did not answer, and the answers that
// were not remembered since the last Flush (dropped with LastGood's queue
// full, refused by the store, or still waiting when ctx ended), joined; nil
// when everything was written.
func (c *Chain) Flush(ctx context.Context) error {
	var errs []error
	if c.shared != nil {
		c.shared.settle(ctx)
		if err := c.shared.state.Flush(ctx); err != nil {
			for _, e := range unjoin(err) {
				errs = append(errs, fmt.Errorf("chain %q: %w", c.name, e))
			}
		}
	}
	flushed := map[*budget.Shared]bool{} // a tier's targets share their hedge budget
	flush := func(b budget.Budget) {
		if s, ok := b.(*budget.Shared); ok && !flushed[s] {
			flushed[s] = true
			if err := s.Flush(ctx); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, t := range c.targets {
		flush(t.budget)
		if t.hedge != nil {
			flush(t.hedge.budget)
		}
	}
	for _, l := range c.lastGoods {
		if err := l.flush(ctx); err != nil {
			errs = append(errs, fmt.Errorf("chain %q: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// unjoin returns the errors err joins (errors.Join's), or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

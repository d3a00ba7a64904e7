package chain

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/internal/callobs"
	"github.com/backstop-llm/backstop/internal/share"
)

// defaultSharedPrefix begins every key of a shared chain when
// SharedConfig.Prefix is empty.
const defaultSharedPrefix = "backstop"

// SharedConfig configures Builder.Shared. The zero value means every
// default.
type SharedConfig struct {
	// Prefix begins every key the chain writes: "<Prefix>:<chain>:breakers"
	// (one hash: the breakers and Retry-After gates of all its targets)
	// and "<Prefix>:<chain>:<target>:budget" (one hash per target's
	// budget). Empty means "backstop". Replicas share
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
	// observe.SharedLocal event, the backstop.shared.local span
	// event). 0 means 100ms: in a load test of 2
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
	// latency.HedgeRatio (10%); the other zero fields budget's defaults.
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
//     go waits for that replica's probe (breaker.Breaker.Admit);
//   - Retry-After gates: a Retry-After one replica does not wait out closes
//     the target on every replica, each for at most its own MaxGate.
//
// What a replica reads is applied once, within its own limits, however
// often it reads it again or however far ahead it ends (see
// breaker.Shared.Fresh).
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
// To share last-known-good answers too, give degrade.LastGood a
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

// share checks the configuration and makes the chain's shared state and
// the shared budgets of the targets without one (internal/share).
func (p *build) share(cfg *sharedSetup) {
	c, o := p.c, cfg.opts
	ts := make([]share.Target, len(c.targets))
	for i, t := range c.targets {
		ts[i] = share.Target{Name: t.Name, Breaker: t.breaker, Gate: &t.gate, MaxGate: t.maxGate, OwnBudget: t.Budget != nil}
		if t.hedge != nil {
			ts[i].HedgeKey = t.hedge.ShareKey
		}
	}
	got, problems := share.Build(cfg.store, share.Config{
		Prefix: cmp.Or(o.Prefix, defaultSharedPrefix), Chain: c.name,
		Timeout: o.Timeout, ProbeEvery: o.ProbeEvery, Refresh: o.Refresh,
		Budget: o.Budget, Hedge: o.Hedge, Logger: o.Logger,
		Unavailable: c.state.SharedUnavailable, // its observers, not c: the callbacks may outlive c
	}, ts)
	for _, pr := range problems {
		p.errs = append(p.errs, &ConfigError{Chain: c.name, Target: pr.Target, Problem: pr.What, Err: pr.Err})
	}
	c.shared = got.State
	for i, b := range got.Budgets {
		if b != nil {
			c.targets[i].budget = b
		}
	}
	for _, t := range c.targets {
		if h := t.hedge; h != nil && got.Hedges[h.ShareKey] != nil {
			h.Budget = got.Hedges[h.ShareKey]
		}
	}
}

// sync makes sure the call decides on a fresh mirror of what the other
// replicas published about the chain's targets (breaker.Shared.Fresh),
// and says so when it decides on this replica's own state instead.
func (c *Chain) sync(ctx context.Context, obs *callobs.Call) {
	if !c.shared.Fresh(ctx) {
		obs.SharedLocal()
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
		c.shared.Settle(ctx)
		if err := c.shared.Flush(ctx); err != nil {
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
			flush(t.hedge.Budget)
		}
	}
	for _, m := range c.memories {
		if err := m.Flush(ctx); err != nil {
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

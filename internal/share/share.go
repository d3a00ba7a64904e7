// Package share builds the shared state of a chain that Builder.Shared
// shares through a store: one breaker.Shared for the breakers and
// Retry-After gates of all its targets, a budget.Shared for each target's
// retry budget that the user did not give, and one for each hedge budget
// that Build made (a tier's, or a target's own). It names the keys:
//
//	<prefix>:<chain>:breakers
//	<prefix>:<chain>:<target>:budget
//	<prefix>:<chain>:<hedge key>:hedge
//
// each name escaped (keyPart). chain keeps the configuration
// (chain.SharedConfig), the store's interface, the mirror's freshness and
// Flush.
package share

import (
	"log/slog"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/internal/latency"
)

// Store builds the stores of the keys it is given (chain.Store's
// methods): Breakers that of the chain's breakers and gates, Budget that
// of one budget.
type Store interface {
	Breakers(key string) breaker.Store
	Budget(key string) budget.Store
}

// Config is chain.SharedConfig as Build hands it on, with the chain's
// name and its state observers.
type Config struct {
	// Prefix begins every key; chain has filled in its default.
	Prefix string
	// Chain is the chain's name, the key's second part.
	Chain                        string
	Timeout, ProbeEvery, Refresh time.Duration
	// Budget is the ratio of each shared retry budget, Hedge of each
	// shared hedge budget (a zero Ratio: latency.HedgeRatio).
	Budget, Hedge budget.RatioConfig
	Logger        *slog.Logger
	// Unavailable is told each time a store stops answering: "breaker",
	// "budget" or "hedge", and the target or hedge key ("" for the
	// breakers). It must not hold the chain (it outlives it).
	Unavailable func(store, target string)
}

// Target is what sharing needs of one of the chain's model targets.
type Target struct {
	Name    string
	Breaker *breaker.Breaker
	Gate    *breaker.Gate
	MaxGate time.Duration
	// OwnBudget is true when the user gave the target its retry budget:
	// it is used as it is, not shared.
	OwnBudget bool
	// HedgeKey names the hedge budget Build made for it, shared by the
	// targets with the same key ("tier:<tier>", or the target's name);
	// "" when it does not hedge or the user gave the budget.
	HedgeKey string
}

// Shared is the chain's shared state.
type Shared struct {
	// State holds the breakers and gates; nil when it could not be made.
	State *breaker.Shared
	// Budgets is the shared retry budget of each target, in the order of
	// the targets given; nil for a target with its own.
	Budgets []budget.Budget
	// Hedges is the shared hedge budget of each HedgeKey.
	Hedges map[string]budget.Budget
}

// Problem is a problem of the configuration: of the whole chain (Target
// "") or of one target; What says what to change, Err is the cause.
type Problem struct {
	Target, What string
	Err          error
}

// Build checks cfg and makes the shared state of targets on store. When it
// finds a problem it still makes what it can, so that the problems it
// returns are all there are.
func Build(store Store, cfg Config, targets []Target) (Shared, []Problem) {
	var out Shared
	var found []Problem
	problem := func(target, what string, err error) {
		found = append(found, Problem{Target: target, What: what, Err: err})
	}
	if cfg.Refresh < 0 {
		problem("", "Shared: Refresh is "+cfg.Refresh.String()+"; it must not be negative (0 means 100ms)", nil)
	}
	if err := cfg.Budget.Validate(); err != nil {
		problem("", "Shared: Budget is invalid", err)
	}
	if err := cfg.Hedge.Validate(); err != nil {
		problem("", "Shared: Hedge is invalid", err)
	}
	if store == nil {
		problem("", "Shared: the store is nil; build one with redisstore.New(client), and check its error", nil)
		return out, found
	}
	unavailable := func(store, target string) func(error) {
		return func(err error) {
			if err != nil && cfg.Unavailable != nil {
				cfg.Unavailable(store, target)
			}
		}
	}
	chain := cfg.Prefix + ":" + keyPart(cfg.Chain) + ":"
	breakers := store.Breakers(chain + "breakers")
	if breakers == nil {
		problem("", "Shared: the store builds no breaker store (a nil *redisstore.Store?); build one with redisstore.New(client), and check its error", nil)
		return out, found
	}
	state, err := breaker.NewShared(breakers, breaker.SharedConfig{
		Timeout:    cfg.Timeout,
		ProbeEvery: cfg.ProbeEvery,
		Refresh:    cfg.Refresh,
		Logger:     cfg.Logger,
		OnError:    unavailable("breaker", ""),
	})
	if err != nil {
		problem("", "Shared is invalid", err)
		return out, found
	}
	out.State = state
	for _, t := range targets {
		state.Track(t.Name, t.Breaker, t.Gate, t.MaxGate)
	}
	share := func(name, kind string, ratio budget.RatioConfig) (budget.Budget, error) {
		return budget.NewShared(store.Budget(chain+keyPart(name)+":"+kind), budget.SharedConfig{
			Ratio:      ratio,
			Timeout:    cfg.Timeout,
			ProbeEvery: cfg.ProbeEvery,
			Available:  state.Available, // one Redis failure, one Timeout per call
			Logger:     cfg.Logger,
			OnError:    unavailable(kind, name),
		})
	}
	out.Budgets = make([]budget.Budget, len(targets))
	for i, t := range targets {
		if t.OwnBudget {
			continue
		}
		b, err := share(t.Name, "budget", cfg.Budget)
		if err != nil {
			problem(t.Name, "Shared: the target's shared budget", err)
			continue
		}
		out.Budgets[i] = b
	}
	hedges := cfg.Hedge
	if hedges.Ratio == 0 {
		hedges.Ratio = latency.HedgeRatio
	}
	out.Hedges = map[string]budget.Budget{} // one per key: a tier's targets share theirs
	for _, t := range targets {
		if t.HedgeKey == "" {
			continue
		}
		if _, ok := out.Hedges[t.HedgeKey]; ok {
			continue
		}
		b, err := share(t.HedgeKey, "hedge", hedges)
		if err != nil {
			problem(t.Name, "Shared: the shared hedge budget", err)
			continue
		}
		out.Hedges[t.HedgeKey] = b
	}
	return out, found
}

// keyEscaper escapes the parts of a key that come from names, so that
// chain "eu:support" with target "primary" and chain "eu" with target
// "support:primary" get different keys.
var keyEscaper = strings.NewReplacer("%", "%25", ":", "%3A")

// keyPart is name as one part of a Redis key: its '%' and ':' escaped.
func keyPart(name string) string { return keyEscaper.Replace(name) }

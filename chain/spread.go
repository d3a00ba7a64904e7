package chain

// Spreading: a tier's targets ordered afresh for each call by its
// strategy (package spread), and a retry sent to another target of the
// tier first.

import (
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/internal/rank"
	"github.com/backstop-llm/backstop/spread"
	"github.com/backstop-llm/backstop/throttle"
)

// Spread sets how the targets of tiers share the calls: the strategy
// orders them afresh for each call (spread.Weighted, LeastLoaded, Latency,
// Headroom), the first gets the call, and a failure that would retry it
// goes to the tier's next target first (the retry policy applies in place
// once every target of the tier has had its attempt, or where the decision
// table's next-target column keeps the call). With no tiers named
// it applies to every model tier. The primary and its OrDeployment targets
// are one tier, named by TierPrimary or TierDeployment: the primary's
// model on every deployment; OrSibling targets are another, OrProvider
// targets a third. spread.Ordered, the default, walks them in the order
// added. Calling it again for a tier replaces that tier's strategy.
//
// Each attempt's record and span say which strategy chose its target and
// the figures it compared (Attempt.Choice).
func (b *Builder) Spread(s spread.Strategy, tiers ...Tier) *Builder {
	for _, g := range groupsOf(tiers) {
		b.groups[g].strategy = s
	}
	b.groupTiers = append(b.groupTiers, tiers...)
	return b
}

// Hedge hedges the attempts on the targets of tiers (every model tier when
// none is named; tiers as Spread names them): an attempt that has not
// answered within the delay (a stream: not sent its first chunk) is raced
// by the same request sent to the next target of its tier, in the call's
// order. The first acceptable answer (one that passes the schema; a
// stream's first chunk) wins; the other attempt is canceled at once and
// recorded with DecisionLost, its breaker told neither of a failure nor of
// a success. No hedge is sent to a target whose breaker is open, whose
// Retry-After gate is closed, whose throttle has no slot now, or past the
// deadline; each hedge spends from the tier's hedge budget (h.Budget, by
// default 10% of the tier's calls). One hedge per attempt. A target's own
// Target.Hedge replaces h for its attempts.
func (b *Builder) Hedge(h hedge.Config, tiers ...Tier) *Builder {
	for _, g := range groupsOf(tiers) {
		b.groups[g].hedge = h
	}
	b.groupTiers = append(b.groupTiers, tiers...)
	return b
}

// groupSetup is what Spread and Hedge set for one tier.
type groupSetup struct {
	strategy spread.Strategy
	hedge    hedge.Config
}

// The groups: the primary's model on its deployments, the siblings, the
// other providers.
const (
	groupDeployments = iota
	groupSiblings
	groupProviders
	groups
)

// groupOf returns the group of a model tier.
func groupOf(t Tier) int {
	switch t {
	case TierSibling:
		return groupSiblings
	case TierProvider:
		return groupProviders
	}
	return groupDeployments
}

// groupsOf returns the groups tiers name; every group when none. A
// degradation tier names none (Build reports it).
func groupsOf(tiers []Tier) []int {
	if len(tiers) == 0 {
		return []int{groupDeployments, groupSiblings, groupProviders}
	}
	var out []int
	for _, t := range tiers {
		if t < TierDegrade {
			out = append(out, groupOf(t))
		}
	}
	return out
}

// group is one tier's targets as the walk sees them: c.targets[lo:hi],
// their strategy (c.layout's tier index), and their hedging's shared
// parts.
type group struct {
	name     string // "deployment", "sibling" or "provider", for records
	index    int    // its place among the chain's groups, and c.layout's tiers
	lo, hi   int
	strategy spread.Strategy
	// window holds the tier's recent answer times (a stream's: its first
	// chunk), for adaptive hedge delays; nil when no target of the tier
	// hedges.
	window *latency.Window
}

// spreads reports whether g orders its targets per call.
func (g *group) spreads() bool { return g.strategy != spread.Ordered && g.hi-g.lo > 1 }

// checkGroups checks what Spread and Hedge were given.
func (p *build) checkGroups() {
	for _, t := range p.b.groupTiers {
		if t >= TierDegrade {
			p.fail("", "Spread or Hedge was given tier %v; name a model tier (TierPrimary, TierDeployment, TierSibling, TierProvider), or none for all", t)
		}
	}
	for g := range p.b.groups {
		s := &p.b.groups[g]
		if !s.strategy.Valid() {
			p.fail("", "Spread was given %v; use one of spread.Ordered, Weighted, LeastLoaded, Latency, Headroom", s.strategy)
		}
		p.wrap("", "Hedge is invalid", s.hedge.Validate())
	}
}

// compileGroups makes the groups of c's targets (in tier order, so each
// group is a run of them) and gives each target its group, its load
// figures when the group's strategy or hedging reads them, and its
// hedging; then the layout the walk ranks them by.
func (p *build) compileGroups() {
	c := p.c
	var tiers []rank.Tier
	for lo := 0; lo < len(c.targets); {
		gi := groupOf(c.targets[lo].tier)
		hi := lo
		for hi < len(c.targets) && groupOf(c.targets[hi].tier) == gi {
			hi++
		}
		setup := p.b.groups[gi]
		g := &group{name: [...]string{"deployment", "sibling", "provider"}[gi], index: len(c.groups), lo: lo, hi: hi, strategy: setup.strategy}
		var tierBudget budget.Budget // the tier's hedge budget, made once
		for _, t := range c.targets[lo:hi] {
			t.group = g
			if g.strategy == spread.LeastLoaded || g.strategy == spread.Latency {
				t.load = &rank.Load{}
			}
			h := setup.hedge
			if t.Hedge.On() {
				h = t.Hedge
			}
			if !h.On() {
				continue
			}
			if g.window == nil {
				g.window = &latency.Window{}
			}
			hr := &hedger{cfg: h, budget: h.Budget}
			switch {
			case h.Budget != nil:
			case t.Hedge.On(): // the target's own hedging, its own budget
				hr.budget, hr.shareKey = p.hedgeBudget(t.Name), t.Name
			default:
				if tierBudget == nil {
					tierBudget = p.hedgeBudget("")
				}
				hr.budget, hr.shareKey = tierBudget, "tier:"+g.name
			}
			t.hedge = hr
		}
		if g.window != nil && hi-lo == 1 {
			c.warnings = append(c.warnings, fmt.Sprintf("target %q hedges but is the only target of its tier: a hedge goes to the next target of the tier, so none is ever sent", c.targets[lo].Name))
		}
		c.groups = append(c.groups, g)
		c.spreads = c.spreads || g.spreads()
		tiers = append(tiers, rank.Tier{Strategy: g.strategy, Members: members(c.targets[lo:hi])})
		lo = hi
	}
	if c.spreads {
		var err error
		c.layout, err = rank.NewLayout(c.epoch, tiers...)
		p.wrap("", "Spread is invalid", err)
	}
}

// members returns ts as their tier's ranking reads them.
func members(ts []*target) []rank.Member {
	ms := make([]rank.Member, len(ts))
	for i, t := range ts {
		ms[i] = rank.Member{Name: t.Name, Weight: t.Weight, Load: t.load}
		if lim := t.throttle; lim != nil && t.group.strategy == spread.Headroom {
			ms[i].Room = func(now time.Time) (float64, time.Duration) {
				h := lim.Headroom(now) // before the first headers: the provisional pace
				return h.Available, h.Wait
			}
		}
	}
	return ms
}

// hedgeBudget returns a hedge budget of hedge.DefaultRatio, for target
// ("" for a tier's).
func (p *build) hedgeBudget(target string) budget.Budget {
	b, err := budget.NewRatio(budget.RatioConfig{Ratio: hedge.DefaultRatio})
	p.wrap(target, "the default hedge budget", err)
	return b
}

// headroomThrottle is the throttle a Headroom tier gives a target whose
// Throttle is the zero Config: Learn, whose provisional pace (one request
// a second until the first headers) gives the ranking a room to read
// before the provider announces any; the defaults otherwise.
var headroomThrottle = throttle.Config{Learn: true}

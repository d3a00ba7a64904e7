package chain

// Spreading: a tier's targets ordered afresh for each call by its
// strategy (package spread), and a retry sent to another target of the
// tier first.

import (
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
		b.groups[g].Strategy = s
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
		b.groups[g].Hedge = h
	}
	b.groupTiers = append(b.groupTiers, tiers...)
	return b
}

// groupOf returns the group (rank.Deployments, Siblings, Providers) of
// a model tier: the primary's model on its deployments, the siblings, the
// other providers.
func groupOf(t Tier) int {
	switch t {
	case TierSibling:
		return rank.Siblings
	case TierProvider:
		return rank.Providers
	}
	return rank.Deployments
}

// groupsOf returns the groups tiers name; every group when none. A
// degradation tier names none (Build reports it).
func groupsOf(tiers []Tier) []int {
	if len(tiers) == 0 {
		return []int{rank.Deployments, rank.Siblings, rank.Providers}
	}
	var out []int
	for _, t := range tiers {
		if t < TierDegrade {
			out = append(out, groupOf(t))
		}
	}
	return out
}

// checkGroups checks what Spread and Hedge were given.
func (p *build) checkGroups() {
	for _, t := range p.b.groupTiers {
		if t >= TierDegrade {
			p.fail("", "Spread or Hedge was given tier %v; name a model tier (TierPrimary, TierDeployment, TierSibling, TierProvider), or none for all", t)
		}
	}
	for g := range p.b.groups {
		s := &p.b.groups[g]
		if s.Strategy > spread.Headroom {
			p.fail("", "Spread was given %v; use one of spread.Ordered, Weighted, LeastLoaded, Latency, Headroom", s.Strategy)
		}
		p.wrap("", "Hedge is invalid", s.Hedge.Validate())
	}
}

// compileGroups gives each of c's targets its group, its load figures
// when the group's strategy reads them, and its hedging (rank.Compile);
// then the layout the walk ranks them by.
func (p *build) compileGroups() {
	c := p.c
	es := make([]rank.Entry, len(c.targets))
	for i, t := range c.targets {
		es[i] = rank.Entry{Name: t.Name, Group: groupOf(t.tier), Weight: t.Weight, Hedge: t.Hedge, Throttle: t.throttle}
	}
	g, err := rank.Compile(c.epoch, &p.b.groups, es, p.hedgeBudget)
	p.wrap("", "Spread is invalid", err)
	for i, t := range c.targets {
		t.group, t.load, t.hedge = g.Places[i].Group, g.Places[i].Load, g.Places[i].Hedge
	}
	c.layout, c.spreads = g.Layout, g.Layout != nil
	c.warnings = append(c.warnings, g.Warnings...)
}

// hedgeBudget returns a hedge budget of latency.HedgeRatio, for target
// ("" for a tier's).
func (p *build) hedgeBudget(target string) budget.Budget {
	b, err := budget.NewRatio(budget.RatioConfig{Ratio: latency.HedgeRatio})
	p.wrap(target, "the default hedge budget", err)
	return b
}

// headroomThrottle is the throttle a Headroom tier gives a target whose
// Throttle is the zero Config: Learn, whose provisional pace (one request
// a second until the first headers) gives the ranking a room to read
// before the provider announces any; the defaults otherwise.
var headroomThrottle = throttle.Config{Learn: true}

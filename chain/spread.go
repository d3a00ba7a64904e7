package chain

// Spreading: a tier's targets ordered afresh for each call by its
// strategy (package spread), and a retry sent to another target of the
// tier first.

import (
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/spread"
	"github.com/backstop-llm/backstop/throttle"
)

// Spread sets how the targets of tiers share the calls: the strategy
// orders them afresh for each call (spread.Weighted, LeastLoaded, Latency,
// Headroom), the first gets the call, and a failure that would retry it
// goes to the tier's next target first (the retry policy applies in place
// once every target of the tier has had its attempt). With no tiers named
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
		b.groups[g].strategy, b.groups[g].spreadSet = s, true
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
		b.groups[g].hedge, b.groups[g].hedgeSet = h, true
	}
	b.groupTiers = append(b.groupTiers, tiers...)
	return b
}

// groupSetup is what Spread and Hedge set for one tier.
type groupSetup struct {
	strategy  spread.Strategy
	hedge     hedge.Config
	spreadSet bool
	hedgeSet  bool
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
// their strategy, and their hedging's shared parts.
type group struct {
	name     string // "deployment", "sibling" or "provider", for records
	index    int    // its place among the chain's groups
	lo, hi   int
	strategy spread.Strategy
	cands    []spread.Candidate // its targets' names and weights
	// window holds the tier's recent answer times (a stream's: its first
	// chunk), for adaptive hedge delays; nil when no target of the tier
	// hedges.
	window *hedge.Window
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
// hedging.
func (p *build) compileGroups() {
	c := p.c
	for lo := 0; lo < len(c.targets); {
		gi := groupOf(c.targets[lo].tier)
		hi := lo
		for hi < len(c.targets) && groupOf(c.targets[hi].tier) == gi {
			hi++
		}
		setup := p.b.groups[gi]
		g := &group{name: [...]string{"deployment", "sibling", "provider"}[gi], index: len(c.groups), lo: lo, hi: hi, strategy: setup.strategy}
		for _, t := range c.targets[lo:hi] {
			g.cands = append(g.cands, spread.Candidate{Name: t.Name, Weight: t.Weight})
		}
		var tierBudget budget.Budget // the tier's hedge budget, made once
		for _, t := range c.targets[lo:hi] {
			t.group = g
			if g.strategy == spread.LeastLoaded || g.strategy == spread.Latency {
				t.load = &spread.Load{}
			}
			h := setup.hedge
			if t.Hedge.On() {
				h = t.Hedge
			}
			if !h.On() {
				continue
			}
			if g.window == nil {
				g.window = &hedge.Window{}
			}
			hr := &hedger{cfg: h.WithDefaults(), budget: h.Budget}
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
		lo = hi
	}
}

// hedgeBudget returns a hedge budget of hedge.DefaultRatio, for target
// ("" for a tier's).
func (p *build) hedgeBudget(target string) budget.Budget {
	b, err := budget.NewRatio(budget.RatioConfig{Ratio: hedge.DefaultRatio})
	p.wrap(target, "the default hedge budget", err)
	return b
}

// target returns the target at position pos of this call's walk.
func (w *walk) target(pos int) *target {
	if rk := w.rk; rk != nil && rk.ranked != 0 {
		return w.c.targets[rk.order[pos]]
	}
	return w.c.targets[pos]
}

// ranking is how one call of a chain that spreads ordered its tiers: it
// lives in the call's result allocation (spreadResult), so that a chain
// that does not spread carries none of it, and one that does allocates
// once per call all the same.
type ranking struct {
	// ranked marks the groups (by index) ranked for this call; 0 while
	// the walk follows the chain's order. order is then the index of the
	// target at each position, figs the figure it was ranked by, vs what
	// each group's first was preferred to.
	ranked uint8
	order  []int16
	figs   []float32
	vs     [groups]rival
	// choice is room for the first Choice the walk records; used counts
	// what is taken.
	choice [1]spread.Choice
	used   int

	orderBuf [16]int16
	figsBuf  [16]float32
}

// spreadResult is a Result with the ranking of its call: a chain that
// spreads allocates it instead of a bare Result.
type spreadResult struct {
	Result
	rk ranking
}

// rival is what the target ranked first in a tier was preferred to.
type rival struct {
	name string
	fig  float64
}

// enter ranks the targets of the group that starts at position pos for
// this call, if the group spreads and is not ranked yet (a restarted
// stream keeps its ranking).
func (w *walk) enter(pos int) {
	c, rk := w.c, w.rk
	g := c.targets[pos].group
	if pos != g.lo || !g.spreads() || rk.ranked&(1<<g.index) != 0 {
		return
	}
	if rk.ranked == 0 {
		n := len(c.targets)
		rk.order, rk.figs = rk.orderBuf[:n:n], rk.figsBuf[:n:n]
		if n > len(rk.orderBuf) {
			rk.order, rk.figs = make([]int16, n), make([]float32, n)
		}
		for i := range rk.order {
			rk.order[i] = int16(i)
		}
	}
	rk.ranked |= 1 << g.index
	n := g.hi - g.lo
	cands := g.cands // the weights alone: read, never written
	var buf [4]spread.Candidate
	if g.strategy != spread.Weighted {
		cands = buf[:0]
		if n > len(buf) {
			cands = make([]spread.Candidate, 0, n)
		}
		var now time.Duration
		if g.strategy == spread.Latency || g.strategy == spread.Headroom {
			now = c.clock()
		}
		for _, t := range c.targets[g.lo:g.hi] {
			cands = append(cands, w.candidate(t, now))
		}
	}
	var ibuf [8]int
	order := ibuf[:n:n]
	if n > len(ibuf) {
		order = make([]int, n)
	}
	first := g.strategy.Rank(cands, order, nil)
	var slowest time.Duration
	if g.strategy == spread.Latency {
		for i := range cands {
			slowest = max(slowest, cands[i].Latency)
		}
	}
	for k, i := range order {
		rk.order[g.lo+k] = int16(g.lo + i)
		rk.figs[g.lo+k] = float32(g.strategy.Figure(&cands[i], max(slowest, time.Millisecond)))
	}
	rk.vs[g.index] = rival{first.Against, first.AgainstFigure}
}

// candidate gathers what the group's strategy compares of t.
func (w *walk) candidate(t *target, now time.Duration) spread.Candidate {
	cand := spread.Candidate{Name: t.Name, Weight: t.Weight}
	if t.load != nil {
		cand.InFlight = t.load.InFlight()
		if t.group.strategy == spread.Latency {
			cand.Latency = t.load.Latency(now)
		}
	}
	if t.group.strategy == spread.Headroom && t.throttle != nil {
		room := t.throttle.Headroom(w.c.epoch.Add(now))
		cand.Room, cand.Wait, cand.RoomKnown = room.Available, room.Wait, true // before the first headers: the provisional pace
	}
	return cand
}

// choice returns the Choice that sent the walk to position pos, made for
// the record that keeps it; nil in an ordered tier.
func (w *walk) choice(pos int) *spread.Choice {
	rk := w.rk
	if rk == nil || rk.ranked == 0 {
		return nil
	}
	g := w.c.targets[pos].group // positions keep to their tier's range
	if rk.ranked&(1<<g.index) == 0 {
		return nil
	}
	var ch *spread.Choice
	if rk.used < len(rk.choice) {
		ch = &rk.choice[rk.used]
		rk.used++
	} else {
		ch = new(spread.Choice)
	}
	*ch = spread.Choice{Strategy: g.strategy, Rank: pos - g.lo + 1, Of: g.hi - g.lo, Figure: float64(rk.figs[pos])}
	if ch.Rank == 1 {
		v := rk.vs[g.index]
		ch.Against, ch.AgainstFigure = v.name, v.fig
	}
	return ch
}

// elsewhere reports whether a retry on t, the target at the walk's
// position, goes to another target of its tier first: the tier spreads,
// and a later target of it is still to be tried in this call.
func (w *walk) elsewhere(t *target) bool {
	g := t.group
	if !g.spreads() {
		return false
	}
	for pos := w.pos + 1; pos < g.hi; pos++ {
		if !w.triedAsHedge(w.target(pos)) {
			return true
		}
	}
	return false
}

// headroomThrottle is the throttle a Headroom tier gives a target that has
// none: learn the limits from the headers, with the throttle's defaults.
var headroomThrottle = throttle.Config{Learn: true}

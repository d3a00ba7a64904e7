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
// their strategy, and their hedging's shared parts.
type group struct {
	name       string // "deployment", "sibling" or "provider", for records
	index      int    // its place among the chain's groups
	lo, hi     int
	strategy   spread.Strategy
	weightFigs []float64 // its targets' weights, as spread.Weighted's figures
	weights    float64   // their total
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
			f := spread.Weighted.Figure(&spread.Candidate{Weight: t.Weight}, 0)
			g.weightFigs = append(g.weightFigs, f)
			g.weights += f
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
	if w.ranked != 0 {
		return w.c.targets[w.orderAt(pos)]
	}
	return w.c.targets[pos]
}

// The ranking of a call's tiers is kept in the walk's own arrays for a
// chain of up to inlineRank targets (arrays indexed, never sliced: a slice
// of the walk would move it to the heap), and in big for a longer one.
const inlineRank = 8

// rival is what a tier's first was preferred to: the target (its index
// in the chain) and its figure; a weighted draw has none.
type rival struct {
	idx int16
	fig float32
}

// bigRanking is the ranking of a chain of more than inlineRank targets.
type bigRanking struct {
	order []int16
	figs  []float32
}

// orderAt is the index of the target at position pos, once ranked.
func (w *walk) orderAt(pos int) int {
	if w.big != nil {
		return int(w.big.order[pos])
	}
	return int(w.order[pos])
}

// figAt is the figure position pos was ranked by.
func (w *walk) figAt(pos int) float64 {
	if w.big != nil {
		return float64(w.big.figs[pos])
	}
	return float64(w.figs[pos])
}

// setRank puts target i at position pos, ranked by fig.
func (w *walk) setRank(pos, i int, fig float64) {
	if w.big != nil {
		w.big.order[pos], w.big.figs[pos] = int16(i), float32(fig)
		return
	}
	w.order[pos], w.figs[pos] = int8(i), float32(fig)
}

// enter ranks the targets of the group that starts at position pos for
// this call, if the group spreads and is not ranked yet (a restarted
// stream keeps its ranking).
func (w *walk) enter(pos int) {
	c := w.c
	g := c.targets[pos].group
	if pos != g.lo || !g.spreads() || w.ranked&(1<<g.index) != 0 {
		return
	}
	if w.ranked == 0 {
		if n := len(c.targets); n > inlineRank {
			w.big = &bigRanking{order: make([]int16, n), figs: make([]float32, n)}
		}
		for i := range c.targets {
			w.setRank(i, i, 0)
		}
	}
	w.ranked |= 1 << g.index
	n := g.hi - g.lo
	var ob [inlineRank]int
	var fb [inlineRank]float64
	order, figs := ob[:], fb[:]
	if n > inlineRank {
		order, figs = make([]int, n), make([]float64, n)
	}
	order, figs = order[:n], figs[:n]
	switch g.strategy {
	case spread.Weighted:
		g.strategy.RankFigures(g.weightFigs, order, nil) // read, never written
		figs = g.weightFigs
	case spread.LeastLoaded:
		for k, t := range c.targets[g.lo:g.hi] {
			figs[k] = float64(t.load.InFlight())
		}
		g.strategy.RankFigures(figs, order, nil)
	default: // Latency and Headroom compare more than one figure each
		w.rankCandidates(g, order, figs)
	}
	for k, i := range order {
		w.setRank(g.lo+k, g.lo+i, figs[i])
	}
	if g.strategy != spread.Weighted {
		// A tier that spreads has two targets or more: every strategy but
		// a weighted draw compared the first with the second.
		w.vs[g.index] = rival{int16(g.lo + order[1]), float32(figs[order[1]])}
	}
}

// rankCandidates ranks g's targets by strategies that read more than a
// figure of each (Latency, Headroom), into order and figs.
func (w *walk) rankCandidates(g *group, order []int, figs []float64) {
	c := w.c
	n := g.hi - g.lo
	var buf [inlineRank]spread.Candidate
	cands := buf[:0]
	if n > len(buf) {
		cands = make([]spread.Candidate, 0, n)
	}
	now := c.clock()
	for _, t := range c.targets[g.lo:g.hi] {
		cands = append(cands, spread.Candidate{})
		w.candidate(&cands[len(cands)-1], t, now)
	}
	g.strategy.Rank(cands, order, figs, nil)
}

// candidate fills cand (zero) with what the group's strategy compares of
// t, at now on the chain's clock.
func (w *walk) candidate(cand *spread.Candidate, t *target, now time.Duration) {
	cand.Name = t.Name
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
}

// choice returns the Choice that sent the walk to position pos, made for
// the record that keeps it (in the result's allocation the first time);
// nil in an ordered tier.
func (w *walk) choice(pos int) *spread.Choice {
	if w.ranked == 0 {
		return nil // the walk follows the chain's order: no call pays for more
	}
	return w.rankedChoice(pos)
}

// rankedChoice is choice in a walk that ranked some tier.
func (w *walk) rankedChoice(pos int) *spread.Choice {
	g := w.c.targets[pos].group // positions keep to their tier's range
	if w.ranked&(1<<g.index) == 0 {
		return nil
	}
	ch := w.spare
	if ch != nil {
		w.spare = nil
	} else {
		ch = new(spread.Choice)
	}
	*ch = spread.Choice{Strategy: g.strategy, Rank: pos - g.lo + 1, Of: g.hi - g.lo, Figure: w.figAt(pos)}
	switch v := w.vs[g.index]; {
	case ch.Rank != 1:
	case g.strategy == spread.Weighted:
		ch.AgainstFigure = g.weights // a draw compares with the total
	default: // enter noted the rival of every other strategy's first
		ch.Against, ch.AgainstFigure = w.c.targets[v.idx].Name, float64(v.fig)
	}
	return ch
}

// later reports whether a target of t's tier after the walk's position
// is still to be tried in this call (not yet sent a hedge).
func (w *walk) later(t *target) bool {
	for pos := w.pos + 1; pos < t.group.hi; pos++ {
		if !w.triedAsHedge(w.target(pos)) {
			return true
		}
	}
	return false
}

// headroomThrottle is the throttle a Headroom tier gives a target whose
// Throttle is the zero Config: Learn, whose provisional pace (one request
// a second until the first headers) gives the ranking a room to read
// before the provider announces any; the defaults otherwise.
var headroomThrottle = throttle.Config{Learn: true}

// spreadResult is a Result with room for the first Choice its call
// records: a chain that spreads allocates it instead of a bare Result, so
// that a healthy call allocates once.
type spreadResult struct {
	Result
	choice spread.Choice
}

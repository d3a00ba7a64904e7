package rank

// A chain's model tiers as groups: each a run of its targets, with the
// spreading and hedging Builder.Spread and Builder.Hedge set for it, and
// the latency samples its ranking and hedging read.

import (
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/policy"
	"github.com/backstop-llm/backstop/spread"
	"github.com/backstop-llm/backstop/throttle"
)

// The groups: the primary's model on its deployments, the siblings, the
// other providers; Groups counts them.
const (
	Deployments = iota
	Siblings
	Providers
	Groups
)

// groupNames are the groups' names, for records.
var groupNames = [Groups]string{"deployment", "sibling", "provider"}

// Setup is what Spread and Hedge set for one group.
type Setup struct {
	Strategy spread.Strategy
	Hedge    hedge.Config
}

// Group is one tier's targets as the walk sees them: the chain's targets
// [Lo, Hi), their strategy (the Layout's tier Index), and their hedging's
// shared parts.
type Group struct {
	Name     string // "deployment", "sibling" or "provider", for records
	Index    int    // its place among the chain's groups, and the Layout's tiers
	Lo, Hi   int
	Strategy spread.Strategy
	// Window holds the tier's recent answer times (a stream's: its first
	// chunk), for adaptive hedge delays; nil when no target of the tier
	// hedges.
	Window *latency.Window
}

// Spreads reports whether g orders its targets per call.
func (g *Group) Spreads() bool { return g.Strategy != spread.Ordered && g.Hi-g.Lo > 1 }

// Hedging is a target's hedging as Build compiled it.
type Hedging struct {
	Config hedge.Config
	Budget budget.Budget
	// Admit is Budget as the policy a hedge is asked of (seam.Hedges),
	// set once every budget is final.
	Admit policy.Policy
	// ShareKey names Budget among the chain's when Compile made it (the
	// tier's, "tier:<tier>", or the target's own, its name), for
	// Builder.Shared to share it; "" for one the user gave.
	ShareKey string
}

// Entry is a target as grouping reads it.
type Entry struct {
	Name     string
	Group    int // Deployments, Siblings or Providers
	Weight   float64
	Hedge    hedge.Config      // its own (Target.Hedge), replacing its group's
	Throttle *throttle.Limiter // nil when off
}

// Place is a target's part of its group: the group, its load figures
// when the group's strategy reads them (nil otherwise), and its hedging
// (nil when off).
type Place struct {
	Group *Group
	Load  *Load
	Hedge *Hedging
}

// Grouping is a chain's targets grouped: a Place for each, in order, the
// Layout the walk ranks them by (nil when no group spreads), and what
// Build warns of.
type Grouping struct {
	Places   []Place
	Layout   *Layout
	Warnings []string
}

// Compile groups es, a chain's targets in tier order (so each group is a
// run of them), as setups say, and makes the layout they are ranked by,
// read from epoch. newBudget makes a hedge budget of latency.HedgeRatio
// for a target ("" for a tier's); the error is NewLayout's.
func Compile(epoch time.Time, setups *[Groups]Setup, es []Entry, newBudget func(target string) budget.Budget) (Grouping, error) {
	out := Grouping{Places: make([]Place, len(es))}
	var tiers []Tier
	spreads := false
	for lo := 0; lo < len(es); {
		gi := es[lo].Group
		hi := lo
		for hi < len(es) && es[hi].Group == gi {
			hi++
		}
		setup := setups[gi]
		g := &Group{Name: groupNames[gi], Index: len(tiers), Lo: lo, Hi: hi, Strategy: setup.Strategy}
		var tierBudget budget.Budget // the tier's hedge budget, made once
		for i := lo; i < hi; i++ {
			e, pl := &es[i], &out.Places[i]
			pl.Group = g
			if g.Strategy == spread.LeastLoaded || g.Strategy == spread.Latency {
				pl.Load = &Load{}
			}
			h := setup.Hedge
			if e.Hedge.On() {
				h = e.Hedge
			}
			if !h.On() {
				continue
			}
			if g.Window == nil {
				g.Window = &latency.Window{}
			}
			hr := &Hedging{Config: h, Budget: h.Budget}
			switch {
			case h.Budget != nil:
			case e.Hedge.On(): // the target's own hedging, its own budget
				hr.Budget, hr.ShareKey = newBudget(e.Name), e.Name
			default:
				if tierBudget == nil {
					tierBudget = newBudget("")
				}
				hr.Budget, hr.ShareKey = tierBudget, "tier:"+g.Name
			}
			pl.Hedge = hr
		}
		if g.Window != nil && hi-lo == 1 {
			out.Warnings = append(out.Warnings, fmt.Sprintf("target %q hedges but is the only target of its tier: a hedge goes to the next target of the tier, so none is ever sent", es[lo].Name))
		}
		spreads = spreads || g.Spreads()
		tiers = append(tiers, Tier{Strategy: g.Strategy, Members: members(es[lo:hi], out.Places[lo:hi], g.Strategy)})
		lo = hi
	}
	if !spreads {
		return out, nil
	}
	var err error
	out.Layout, err = NewLayout(epoch, tiers...)
	return out, err
}

// members returns es, placed at ps, as their tier's ranking reads them.
func members(es []Entry, ps []Place, s spread.Strategy) []Member {
	ms := make([]Member, len(es))
	for i := range es {
		ms[i] = Member{Name: es[i].Name, Weight: es[i].Weight, Load: ps[i].Load}
		if lim := es[i].Throttle; lim != nil && s == spread.Headroom {
			ms[i].Room = func(now time.Time) (float64, time.Duration) {
				h := lim.Headroom(now) // before the first headers: the provisional pace
				return h.Available, h.Wait
			}
		}
	}
	return ms
}

// Sample gives an attempt's end, took after its start (on the chain's
// clock), to what reads its target's latency: its load l (nil when not
// kept; an answer or a timeout is a sample, another failure none) and
// g's answer times (an acceptable answer, unless streamed: a stream's
// first chunk gave its sample).
func (g *Group) Sample(l *Load, start, took time.Duration, err error, streamed bool) {
	if l != nil {
		sample := took // only Latency reads it
		if g.Strategy != spread.Latency || err != nil && llm.KindOf(err) != llm.KindTimeout {
			sample = 0
		}
		l.End(start+took, sample)
	}
	if err == nil && g.Window != nil && !streamed {
		g.Window.Add(took)
	}
}

// FirstChunk notes that an attempt, a stream, sent its first chunk took
// after its start: a sample of g's answer times for adaptive hedges, and
// of firsts, its target's first-chunk times (nil when not kept).
func (g *Group) FirstChunk(firsts *latency.Window, took time.Duration) {
	if g.Window != nil {
		g.Window.Add(took)
	}
	if firsts != nil {
		firsts.Add(took)
	}
}

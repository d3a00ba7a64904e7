// Package spread owns load spreading among the targets of one tier of a
// chain (the deployments of the primary's model, the siblings, the other
// providers): the strategies that order them for each call, the load
// figures the strategies compare (requests in flight, peak-EWMA latency,
// rate-limit headroom), the Ranking that orders a call's tiers as it walks
// them, and the Choice that explains each order in an attempt's record
// and span. The per-call ranking itself is the chain's plumbing
// (internal/rank); this package holds what a user chooses and reads.
//
// A chain walks its tiers in order. Within a tier whose strategy is not
// Ordered, each call ranks the tier's targets afresh: the first gets the
// call, and a failure that would retry the same target goes to the next
// target of the tier first (see chain.Builder.Spread). Ordered, the
// default, keeps the order the targets were added in.
//
// In-flight counts and latencies are this process's own: a replica
// spreads by what it sends and sees (docs/replicas.md says why they are
// not shared).
package spread

import (
	"math"
	"strconv"
	"strings"
)

// Strategy is how a tier's targets are ordered for each call. The zero
// value is Ordered.
type Strategy uint8

// The strategies.
const (
	// Ordered tries the targets in the order they were added, as a chain
	// always has: the first takes every call until it fails.
	Ordered Strategy = iota
	// Weighted draws the first target at random in proportion to its
	// weight (chain.Target.Weight; 0 counts as 1), as Portkey's
	// loadbalance weights do; the others follow by weight, heaviest first
	// (a retry goes where most of the capacity is).
	Weighted
	// LeastLoaded draws two targets at random and tries the one with
	// fewer requests in flight first (the power of two choices), then the
	// others by requests in flight, fewest first.
	LeastLoaded
	// Latency is LeastLoaded judged by cost = the target's peak-EWMA
	// latency x (requests in flight + 1) (Finagle's and Linkerd's peak
	// EWMA): a target that slows down, or piles up requests, gets fewer.
	// Latencies decay over 10s, so that a target that was slow is
	// tried again; a target with no latency yet is judged by the slowest
	// one known.
	Latency
	// Headroom tries first the target whose rate-limit headers say it has
	// the most room now (requests it could take without waiting), then
	// the others by room, and those with none by how soon they have a
	// slot. Its targets learn their limits from the headers (their
	// Throttle gets Learn when it is off), so a target with no room waits
	// for its slot (up to the Throttle's MaxWait) or is passed over,
	// instead of being sent a request to refuse.
	Headroom
)

// String returns the strategy's name as recorded in results and spans:
// "ordered", "weighted", "least-loaded", "latency" or "headroom".
func (s Strategy) String() string {
	switch s {
	case Ordered:
		return "ordered"
	case Weighted:
		return "weighted"
	case LeastLoaded:
		return "least-loaded"
	case Latency:
		return "latency"
	case Headroom:
		return "headroom"
	}
	return "strategy(" + strconv.Itoa(int(s)) + ")"
}

// Choice explains why an attempt went to its target: the strategy, the
// target's place in the call's order, and the figures the strategy
// compared. Ordered tiers record none.
type Choice struct {
	Strategy Strategy
	// Affinity is true when the target was ranked first because it holds
	// the conversation's prompt cache, and is healthy (docs/concepts.md,
	// "Prompt caches"): the strategy's own order follows it, and Against
	// is the target ranked second (the strategy's own first, when it had
	// drawn another), with its figure. String then names the strategy
	// "<strategy>+affinity".
	Affinity bool
	// Rank is the target's place in this call's order of its tier, from 1
	// (chosen first); Of is how many targets were ranked.
	Rank, Of int
	// Figure is what the strategy judged the target by: its weight
	// (Weighted), its requests in flight (LeastLoaded), its cost in
	// milliseconds, peak-EWMA latency x (in flight + 1) (Latency), the
	// requests it has room for now (Headroom; below 1: none).
	Figure float64
	// Against is the target it was preferred to, with that target's
	// figure: the other target drawn (LeastLoaded, Latency), the runner-up
	// (Headroom); for Weighted, Against is empty and AgainstFigure the
	// weights of all the targets drawn from. Empty and 0 when the target
	// was compared with none (a later rank, a tier of one).
	Against       string
	AgainstFigure float64
}

// String renders the choice on one line, for logs and spans:
// "least-loaded 1/3: 2 in flight, eu-1 had 7", or
// "least-loaded+affinity 1/3: 4 in flight, eu-1 had 2" for a target
// ranked first for its prompt cache.
func (c Choice) String() string {
	var b strings.Builder
	b.WriteString(c.Strategy.String())
	if c.Affinity {
		b.WriteString("+affinity")
	}
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(c.Rank))
	b.WriteByte('/')
	b.WriteString(strconv.Itoa(c.Of))
	b.WriteString(": ")
	num := func(f float64) { b.WriteString(strconv.FormatFloat(f, 'f', -1, 64)) }
	switch c.Strategy {
	case Weighted:
		b.WriteString("weight ")
		num(c.Figure)
		if c.AgainstFigure > 0 {
			b.WriteString(" of ")
			num(c.AgainstFigure)
		}
		return b.String()
	case LeastLoaded:
		num(c.Figure)
		b.WriteString(" in flight")
	case Latency:
		b.WriteString("cost ")
		num(math.Round(c.Figure))
		b.WriteString("ms")
	case Headroom:
		if c.Figure < 1 {
			b.WriteString("no room")
		} else {
			b.WriteString("room for ")
			num(math.Floor(c.Figure))
		}
	default:
		b.WriteString("in order")
		return b.String()
	}
	if c.Against != "" {
		b.WriteString(", ")
		b.WriteString(c.Against)
		b.WriteString(" had ")
		if c.Strategy == Latency {
			num(math.Round(c.AgainstFigure))
			b.WriteString("ms")
		} else {
			num(math.Floor(c.AgainstFigure))
		}
	}
	return b.String()
}

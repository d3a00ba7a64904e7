// Package spread owns load spreading among the targets of one tier of a
// chain (the deployments of the primary's model, the siblings, the other
// providers): the strategies that order them for each call, the load
// figures the strategies compare (requests in flight, peak-EWMA latency,
// rate-limit headroom), and the Choice that explains each order in an
// attempt's record and span.
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
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
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
	// Latencies decay over DefaultDecay, so that a target that was slow is
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

// DefaultDecay is how fast a Latency figure forgets: a sample's weight
// falls by e over this long (Finagle's default decay time).
const DefaultDecay = 10 * time.Second

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

// Valid reports whether s is one of the strategies.
func (s Strategy) Valid() bool { return s <= Headroom }

// Choice explains why an attempt went to its target: the strategy, the
// target's place in the call's order, and the figures the strategy
// compared. Ordered tiers record none.
type Choice struct {
	Strategy Strategy
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
// "least-loaded 1/3: 2 in flight, eu-1 had 7".
func (c Choice) String() string {
	var b strings.Builder
	b.WriteString(c.Strategy.String())
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

// Candidate is one target a strategy may rank, with the figures it
// compares. Only the figures of the strategy at hand need be set.
type Candidate struct {
	Name string
	// Weight is the target's weight (Weighted); 0 counts as 1.
	Weight float64
	// InFlight is the requests sent to it that have not ended
	// (LeastLoaded, Latency).
	InFlight int
	// Latency is its peak-EWMA latency now (Latency); 0 when unknown.
	Latency time.Duration
	// Room is the requests it could take now without waiting (Headroom),
	// Wait how long until its next slot when it has none; RoomKnown is
	// false when nothing paces the target (it then counts as room for
	// one). A chain's Headroom tier paces every target, before its first
	// headers at a provisional one request a second, so it always knows.
	Room      float64
	Wait      time.Duration
	RoomKnown bool
}

// Rand is the source of the random draws of Weighted, LeastLoaded and
// Latency: *math/rand/v2.Rand satisfies it. Rank takes nil for the
// package's global, safe for concurrent use.
type Rand interface {
	IntN(n int) int
	Float64() float64
}

// global is math/rand/v2's top-level source.
type global struct{}

func (global) IntN(n int) int   { return rand.IntN(n) }
func (global) Float64() float64 { return rand.Float64() }

// Rank orders cands for one call, best first, writing indices into
// cands to order (which must have room for len(cands)), and returns the
// Choice that explains the first. It reads the figures as they are; it
// does not change them.
func (s Strategy) Rank(cands []Candidate, order []int, r Rand) Choice {
	n := len(cands)
	for i := range n {
		order[i] = i
	}
	c := Choice{Strategy: s, Rank: 1, Of: n}
	if n == 0 {
		return c
	}
	if r == nil {
		r = global{}
	}
	switch s {
	case Weighted:
		return weighted(cands, order, r, c)
	case LeastLoaded, Latency:
		return twoChoices(s, cands, order, r, c)
	case Headroom:
		return byRoom(cands, order, c)
	}
	return c
}

// Figure is what s judges cand by, as Choice.Figure reports it; slowest
// is the Latency to assume for a candidate with none yet.
func (s Strategy) Figure(cand *Candidate, slowest time.Duration) float64 {
	switch s {
	case Weighted:
		return weightOf(cand)
	case LeastLoaded:
		return float64(cand.InFlight)
	case Latency:
		lat := cand.Latency
		if lat <= 0 {
			lat = slowest
		}
		return float64(lat) / float64(time.Millisecond) * float64(cand.InFlight+1)
	case Headroom:
		if !cand.RoomKnown {
			return 1
		}
		return cand.Room
	}
	return 0
}

func weightOf(c *Candidate) float64 {
	if c.Weight <= 0 {
		return 1
	}
	return c.Weight
}

// weighted draws the first candidate at random in proportion to the
// weights, and puts the others after it by weight, heaviest first.
func weighted(cands []Candidate, order []int, r Rand, c Choice) Choice {
	total := 0.0
	for i := range cands {
		total += weightOf(&cands[i])
	}
	x := r.Float64() * total
	j := 0
	for ; j < len(order)-1; j++ {
		x -= weightOf(&cands[j])
		if x < 0 {
			break
		}
	}
	order[0], order[j] = order[j], order[0]
	sortBy(order[1:], func(i int) float64 { return -weightOf(&cands[i]) })
	c.Figure, c.AgainstFigure = weightOf(&cands[order[0]]), total
	return c
}

// twoChoices draws two candidates and puts the one s judges lighter
// first, then the rest by the same figure, lightest first.
func twoChoices(s Strategy, cands []Candidate, order []int, r Rand, c Choice) Choice {
	n := len(cands)
	var slowest time.Duration
	for i := range cands {
		slowest = max(slowest, cands[i].Latency)
	}
	if slowest == 0 {
		slowest = time.Millisecond
	}
	fig := func(i int) float64 { return s.Figure(&cands[i], slowest) }
	if n == 1 {
		c.Figure = fig(0)
		return c
	}
	a := r.IntN(n)
	b := r.IntN(n - 1)
	if b >= a {
		b++
	}
	if fig(b) < fig(a) {
		a, b = b, a
	}
	// a first, b second, the rest after them by figure, lightest first.
	order[0], order[a] = order[a], order[0]
	for k := 1; k < n; k++ { // the value b, wherever the swap left it
		if order[k] == b {
			order[1], order[k] = order[k], order[1]
			break
		}
	}
	sortBy(order[2:], fig)
	c.Figure, c.Against, c.AgainstFigure = fig(order[0]), cands[order[1]].Name, fig(order[1])
	return c
}

// byRoom puts the candidates with the most room first, and those with no
// room (below one request) after them by how soon they have a slot.
func byRoom(cands []Candidate, order []int, c Choice) Choice {
	key := func(i int) float64 {
		cand := &cands[i]
		room := Headroom.Figure(cand, 0)
		if room >= 1 {
			return -room
		}
		return float64(cand.Wait) // no room: the soonest slot first
	}
	sortBy(order, key)
	c.Figure = Headroom.Figure(&cands[order[0]], 0)
	if len(order) > 1 {
		c.Against, c.AgainstFigure = cands[order[1]].Name, Headroom.Figure(&cands[order[1]], 0)
	}
	return c
}

// sortBy sorts order by key, ascending, keeping equal keys in their
// order: an insertion sort, allocation-free for the few targets of a
// tier.
func sortBy(order []int, key func(int) float64) {
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && key(order[j]) < key(order[j-1]); j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
}

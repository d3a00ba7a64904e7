// Package spread owns load spreading among the targets of one tier of a
// chain (the deployments of the primary's model, the siblings, the other
// providers): the strategies that order them for each call, the load
// figures the strategies compare (requests in flight, peak-EWMA latency,
// rate-limit headroom), the Ranking that orders a call's tiers as it walks
// them (over a chain's Layout, made once at Build), and the Choice that
// explains each order in an attempt's record and span.
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

// defaultDecay is how fast a Latency figure forgets: a sample's weight
// falls by e over this long (Finagle's default decay time).
const defaultDecay = 10 * time.Second

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
// Choice that explains the first. When figs is not nil (room for
// len(cands)), it gets each candidate's Figure, indexed as cands. It reads
// the candidates as they are; it does not change them, and it allocates
// nothing for eight candidates or fewer.
func (s Strategy) Rank(cands []Candidate, order []int, figs []float64, r Rand) Choice {
	n := len(cands)
	c := Choice{Strategy: s, Rank: 1, Of: n}
	if n == 0 {
		return c
	}
	var fb [8]float64
	if figs == nil {
		figs = room(fb[:], n)
	}
	var slowest time.Duration
	if s == Latency {
		for i := range cands {
			slowest = max(slowest, cands[i].Latency)
		}
		slowest = max(slowest, time.Millisecond)
	}
	for i := range cands {
		figs[i] = s.Figure(&cands[i], slowest)
	}
	var against int
	if s == Headroom {
		for i := range order[:n] {
			order[i] = i
		}
		byRoom(cands, figs, order)
		against = 1
	} else {
		against = s.RankFigures(figs, order, r)
	}
	c.Figure = figs[order[0]]
	switch {
	case s == Weighted:
		for _, f := range figs {
			c.AgainstFigure += f
		}
	case against > 0 && n > 1:
		c.Against, c.AgainstFigure = cands[order[against]].Name, figs[order[against]]
	}
	return c
}

// RankFigures is Rank for the strategies that judge by the figure alone
// (Ordered, Weighted, LeastLoaded, Latency), from figures already computed
// (Figure's, one per candidate): it writes the order and returns the
// position of the candidate the first was compared with (1), or 0 when
// there is none (Ordered, Weighted, a single candidate). Headroom, which
// also orders by the wait for a slot, needs Rank. It allocates nothing.
func (s Strategy) RankFigures(figs []float64, order []int, r Rand) int {
	n := len(figs)
	for i := range order[:n] {
		order[i] = i
	}
	if r == nil {
		r = global{}
	}
	switch s {
	case Weighted:
		weighted(figs, order, r)
	case LeastLoaded, Latency:
		twoChoices(figs, order, r)
		if n > 1 {
			return 1
		}
	}
	return 0
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
// weights and puts the others after it by weight, heaviest first.
func weighted(weights []float64, order []int, r Rand) {
	total := 0.0
	for _, w := range weights {
		total += w
	}
	x := r.Float64() * total
	j := 0
	for ; j < len(order)-1; j++ {
		if x -= weights[j]; x < 0 {
			break
		}
	}
	order[0], order[j] = order[j], order[0]
	sortDesc(order[1:], weights)
}

// twoChoices draws two candidates and puts the one with the lower figure
// first, the other second, then the rest by figure, lowest first.
func twoChoices(figs []float64, order []int, r Rand) {
	n := len(order)
	if n == 1 {
		return
	}
	x := r.IntN(n * (n - 1)) // one draw for the ordered pair
	a, b := x/(n-1), x%(n-1)
	if b >= a {
		b++
	}
	if figs[b] < figs[a] {
		a, b = b, a
	}
	// a first, b second: order is the identity, so swapping a to the
	// front moves only the value 0 (to a), which is where b is if b is 0.
	order[0], order[a] = a, 0
	if b == 0 {
		b = a
	}
	order[1], order[b] = order[b], order[1]
	sortAsc(order[2:], figs)
}

// byRoom puts the candidates with the most room (figs) first, and those
// with no room (below one request) after them by how soon they have a
// slot.
func byRoom(cands []Candidate, figs []float64, order []int) {
	var kb [8]float64
	keys := room(kb[:], len(cands))
	for i := range cands {
		if figs[i] >= 1 {
			keys[i] = -figs[i]
		} else {
			keys[i] = float64(cands[i].Wait) // no room: the soonest slot first
		}
	}
	sortAsc(order, keys)
}

// room returns n floats: buf's first n when it has them, else new ones.
func room(buf []float64, n int) []float64 {
	if n <= len(buf) {
		return buf[:n]
	}
	return make([]float64, n)
}

// sortAsc sorts order (indices into keys) by key, lowest first, keeping
// equal keys in their order: an insertion sort, allocation-free for the
// few targets of a tier. sortDesc sorts highest first.
func sortAsc(order []int, keys []float64) {
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && keys[order[j]] < keys[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
}

func sortDesc(order []int, keys []float64) {
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && keys[order[j]] > keys[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
}

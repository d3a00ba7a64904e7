// Package rank is the per-call ranking of a chain's spread tiers: the
// Layout a chain makes at Build, each call's Ranking over it, the Load
// figures the strategies compare, and the strategies' ranking itself
// (Rank). It is chain's plumbing; package spread holds what a user
// chooses (the Strategy) and reads (the Choice).
package rank

import (
	"math/rand/v2"
	"time"

	"github.com/backstop-llm/backstop/spread"
)

// defaultDecay is how fast a Latency figure forgets: a sample's weight
// falls by e over this long (Finagle's default decay time).
const defaultDecay = 10 * time.Second

// Candidate is one target a strategy may rank, with the figures it
// compares. Only the figures of the strategy at hand need be set.
type Candidate struct {
	Name string
	// Weight is the target's weight (spread.Weighted); 0 counts as 1.
	Weight float64
	// InFlight is the requests sent to it that have not ended
	// (spread.LeastLoaded, spread.Latency).
	InFlight int
	// Latency is its peak-EWMA latency now (spread.Latency); 0 when unknown.
	Latency time.Duration
	// Room is the requests it could take now without waiting (spread.Headroom),
	// Wait how long until its next slot when it has none; RoomKnown is
	// false when nothing paces the target (it then counts as room for
	// one). A chain's spread.Headroom tier paces every target, before its first
	// headers at a provisional one request a second, so it always knows.
	Room      float64
	Wait      time.Duration
	RoomKnown bool
}

// Rand is the source of the random draws of spread.Weighted, spread.LeastLoaded and
// spread.Latency: *math/rand/v2.Rand satisfies it. Rank takes nil for the
// package's global, safe for concurrent use.
type Rand interface {
	IntN(n int) int
	Float64() float64
}

// global is math/rand/v2's top-level source.
type global struct{}

func (global) IntN(n int) int   { return rand.IntN(n) }
func (global) Float64() float64 { return rand.Float64() }

// Rank orders cands by s for one call, best first, writing indices into
// cands to order (which must have room for len(cands)), and returns the
// Choice that explains the first. When figs is not nil (room for
// len(cands)), it gets each candidate's Figure, indexed as cands. It reads
// the candidates as they are; it does not change them, and it allocates
// nothing for eight candidates or fewer.
func Rank(s spread.Strategy, cands []Candidate, order []int, figs []float64, r Rand) spread.Choice {
	n := len(cands)
	c := spread.Choice{Strategy: s, Rank: 1, Of: n}
	if n == 0 {
		return c
	}
	var fb [8]float64
	if figs == nil {
		figs = room(fb[:], n)
	}
	var slowest time.Duration
	if s == spread.Latency {
		for i := range cands {
			slowest = max(slowest, cands[i].Latency)
		}
		slowest = max(slowest, time.Millisecond)
	}
	for i := range cands {
		figs[i] = Figure(s, &cands[i], slowest)
	}
	var against int
	if s == spread.Headroom {
		for i := range order[:n] {
			order[i] = i
		}
		byRoom(cands, figs, order)
		against = 1
	} else {
		against = RankFigures(s, figs, order, r)
	}
	c.Figure = figs[order[0]]
	switch {
	case s == spread.Weighted:
		for _, f := range figs {
			c.AgainstFigure += f
		}
	case against > 0 && n > 1:
		c.Against, c.AgainstFigure = cands[order[against]].Name, figs[order[against]]
	}
	return c
}

// RankFigures is Rank for the strategies that judge by the figure alone
// (spread.Ordered, spread.Weighted, spread.LeastLoaded, spread.Latency), from figures already computed
// (Figure's, one per candidate): it writes the order and returns the
// position of the candidate the first was compared with (1), or 0 when
// there is none (spread.Ordered, spread.Weighted, a single candidate). spread.Headroom, which
// also orders by the wait for a slot, needs Rank. It allocates nothing.
func RankFigures(s spread.Strategy, figs []float64, order []int, r Rand) int {
	n := len(figs)
	for i := range order[:n] {
		order[i] = i
	}
	if r == nil {
		r = global{}
	}
	switch s {
	case spread.Weighted:
		weighted(figs, order, r)
	case spread.LeastLoaded, spread.Latency:
		twoChoices(figs, order, r)
		if n > 1 {
			return 1
		}
	}
	return 0
}

// Figure is what s judges cand by, as Choice.Figure reports it; slowest
// is the spread.Latency to assume for a candidate with none yet.
func Figure(s spread.Strategy, cand *Candidate, slowest time.Duration) float64 {
	switch s {
	case spread.Weighted:
		return weightOf(cand)
	case spread.LeastLoaded:
		return float64(cand.InFlight)
	case spread.Latency:
		lat := cand.Latency
		if lat <= 0 {
			lat = slowest
		}
		return float64(lat) / float64(time.Millisecond) * float64(cand.InFlight+1)
	case spread.Headroom:
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

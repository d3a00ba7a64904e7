package rank

import (
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/spread"
)

// Member is one target of a tier as its strategy reads it, live: a
// Ranking reads its figures when it ranks the tier, once per call.
type Member struct {
	Name string
	// Weight is its weight (spread.Weighted); 0 counts as 1.
	Weight float64
	// Load is its load (spread.LeastLoaded, spread.Latency); nil counts as nothing in
	// flight and no latency known.
	Load *Load
	// Room reports the requests it could take at now without waiting and,
	// when it has none, how long until its next slot (spread.Headroom), as
	// throttle.Limiter.Headroom's Available and Wait do; nil when nothing
	// paces the target (it then counts as room for one).
	Room func(now time.Time) (room float64, wait time.Duration)
}

// Tier is one tier of a Layout: its strategy and its members, a run of
// the layout's positions.
type Tier struct {
	Strategy spread.Strategy
	Members  []Member
}

// maxTiers is how many tiers a Layout holds: a Ranking marks those it
// ranked in one word.
const maxTiers = 64

// Layout is a chain's targets as spreading sees them: its tiers in order,
// each a run of positions (the first tier's members at positions 0 to
// n-1, the next tier's after them). It is made once (NewLayout), when the
// chain is built, and read by every call's Ranking; it is safe for
// concurrent use.
type Layout struct {
	epoch   time.Time
	members []Member // by position
	of      []uint8  // each position's tier
	tiers   []tier
}

// tier is one tier of a Layout, compiled.
type tier struct {
	lo, hi   int
	strategy spread.Strategy
	weights  []float64 // Weighted: its members' weights, as its figures
	total    float64   // their sum
}

// spreads reports whether t orders its members per call.
func (t *tier) spreads() bool { return t.strategy != spread.Ordered && t.hi-t.lo > 1 }

// NewLayout returns the layout of tiers, whose members' figures are read
// on one monotonic clock: durations since epoch (Load's times), or times
// (Member.Room's). It fails for a strategy that is not one of the
// package's, or more than 64 tiers.
func NewLayout(epoch time.Time, tiers ...Tier) (*Layout, error) {
	if len(tiers) > maxTiers {
		return nil, fmt.Errorf("spread: %d tiers; a Layout holds at most %d", len(tiers), maxTiers)
	}
	l := &Layout{epoch: epoch, tiers: make([]tier, 0, len(tiers))}
	for i, ts := range tiers {
		if ts.Strategy > spread.Headroom {
			return nil, fmt.Errorf("spread: tier %d has %v; use one of Ordered, Weighted, LeastLoaded, Latency, Headroom", i, ts.Strategy)
		}
		t := tier{lo: len(l.members), strategy: ts.Strategy}
		for _, m := range ts.Members {
			l.members = append(l.members, m)
			l.of = append(l.of, uint8(i))
			if ts.Strategy == spread.Weighted {
				f := weightOf(&Candidate{Weight: m.Weight})
				t.weights = append(t.weights, f)
				t.total += f
			}
		}
		t.hi = len(l.members)
		l.tiers = append(l.tiers, t)
	}
	return l, nil
}

// inline is how many positions a Ranking ranks in its own arrays: a
// longer layout's ranking takes an allocation.
const inline = 8

// slot is a position of a ranking past inline: the member's position in
// the layout and the figure it was ranked by.
type slot struct {
	idx int32
	fig float32
}

// Ranking is one call's order of a Layout's positions: each tier that
// spreads is ranked by its strategy when the call enters it (Enter), and
// the call then tries, at each position, the member At says, recording
// the spread.Choice that sent it there. Tiers the call has not entered, and
// those that do not spread (spread.Ordered, or of one member), keep the layout's
// order.
//
// The zero value follows the layout's order; Start gives it a layout.
// A Ranking belongs to one call and is not safe for concurrent use. It
// lives in the caller's own state (a walk): for a layout of up to eight
// positions it ranks in its own arrays, and allocates nothing but the
// Choices that no spare held.
type Ranking struct {
	layout *Layout
	spare  *spread.Choice
	// ranked marks the tiers (by index) ranked for this call; 0 while
	// the call follows the layout's order. order (big, past inline
	// positions) is then the member at each position and figs the figure
	// it was ranked by. Arrays indexed, never sliced: a slice of them
	// would move the caller's state to the heap.
	ranked uint64
	// affine marks the tiers whose first position Prefer set: the
	// target holds the call's prompt cache.
	affine uint64
	order  [inline]int8
	figs   [inline]float32
	big    []slot
}

// Start starts r for a call over l: r must be zero. spare, when not nil,
// is the spread.Choice the first Choice call returns (a caller allocates it
// with what else the call needs: one allocation for both).
func (r *Ranking) Start(l *Layout, spare *spread.Choice) {
	r.layout, r.spare = l, spare
}

// At returns the layout position of the member the call tries at
// position pos.
func (r *Ranking) At(pos int) int {
	switch {
	case r.ranked == 0:
		return pos
	case r.big != nil:
		return int(r.big[pos].idx)
	}
	return int(r.order[pos])
}

// Ranked reports whether the call ranked the tier at index tier (the
// order of NewLayout's tiers): false for one that does not spread.
func (r *Ranking) Ranked(tier int) bool { return r.ranked&(1<<tier) != 0 }

// fig returns the figure position pos was ranked by.
func (r *Ranking) fig(pos int) float64 {
	if r.big != nil {
		return float64(r.big[pos].fig)
	}
	return float64(r.figs[pos])
}

// set puts member i at position pos, ranked by fig.
func (r *Ranking) set(pos, i int, fig float64) {
	if r.big != nil {
		r.big[pos] = slot{int32(i), float32(fig)}
		return
	}
	r.order[pos], r.figs[pos] = int8(i), float32(fig)
}

// Enter ranks the tier that starts at position pos, when it spreads and
// this call has not ranked it yet (a call that goes back over a tier it
// entered keeps its order); at any other position it does nothing. A
// call enters each position before it tries it. It reports whether it
// ranked the tier (then, and only then, Prefer may reorder it).
func (r *Ranking) Enter(pos int) bool {
	l := r.layout
	if l == nil {
		return false
	}
	ti := int(l.of[pos])
	t := &l.tiers[ti]
	if pos != t.lo || !t.spreads() || r.Ranked(ti) {
		return false
	}
	if r.ranked == 0 {
		n := len(l.members)
		if n > inline {
			r.big = make([]slot, n)
		}
		for i := range n {
			r.set(i, i, 0)
		}
	}
	r.ranked |= 1 << ti
	n := t.hi - t.lo
	var ob [inline]int
	var fb [inline]float64
	order, figs := ob[:], fb[:]
	if n > inline {
		order, figs = make([]int, n), make([]float64, n)
	}
	order, figs = order[:n], figs[:n]
	switch t.strategy {
	case spread.Weighted:
		RankFigures(t.strategy, t.weights, order, nil) // read, never written
		figs = t.weights
	case spread.LeastLoaded:
		for k := range l.members[t.lo:t.hi] {
			figs[k] = float64(inFlight(l.members[t.lo+k].Load))
		}
		RankFigures(t.strategy, figs, order, nil)
	default: // spread.Latency and spread.Headroom compare more than one figure each
		r.rankCandidates(t, order, figs)
	}
	for k, i := range order {
		r.set(t.lo+k, t.lo+i, figs[i])
	}
	return true
}

// Prefer puts the member at layout position member first in the tier
// that starts at pos, which Enter has just ranked, the others following
// in the order the strategy gave them; its Choice then says Affinity. A
// member outside that tier, or a tier not ranked, is left as it is.
func (r *Ranking) Prefer(pos, member int) {
	l := r.layout
	if l == nil {
		return
	}
	ti := int(l.of[pos])
	t := &l.tiers[ti]
	if pos != t.lo || !r.Ranked(ti) || member < t.lo || member >= t.hi {
		return
	}
	k := t.lo
	for r.At(k) != member {
		k++
	}
	fig := r.fig(k)
	for ; k > t.lo; k-- {
		r.set(k, r.At(k-1), r.fig(k-1))
	}
	r.set(t.lo, member, fig)
	r.affine |= 1 << ti
}

// rankCandidates ranks t's members by strategies that read more than a
// figure of each (spread.Latency, spread.Headroom), into order and figs.
func (r *Ranking) rankCandidates(t *tier, order []int, figs []float64) {
	l := r.layout
	n := t.hi - t.lo
	var buf [inline]Candidate
	cands := buf[:0]
	if n > len(buf) {
		cands = make([]Candidate, 0, n)
	}
	now := time.Since(l.epoch)
	for k := range l.members[t.lo:t.hi] {
		cands = append(cands, Candidate{})
		candidate(&cands[len(cands)-1], &l.members[t.lo+k], t.strategy, l.epoch, now)
	}
	Rank(t.strategy, cands, order, figs, nil)
}

// candidate fills cand (zero) with what s compares of m, at now on the
// clock that starts at epoch.
func candidate(cand *Candidate, m *Member, s spread.Strategy, epoch time.Time, now time.Duration) {
	cand.Name = m.Name
	if m.Load != nil {
		cand.InFlight = m.Load.InFlight()
		if s == spread.Latency {
			cand.Latency = m.Load.Latency(now)
		}
	}
	if s == spread.Headroom && m.Room != nil {
		cand.Room, cand.Wait = m.Room(epoch.Add(now))
		cand.RoomKnown = true
	}
}

// inFlight is l's requests in flight; none for a nil l.
func inFlight(l *Load) int {
	if l == nil {
		return 0
	}
	return l.InFlight()
}

// Choice returns the spread.Choice that sent the call to position pos: nil in a
// tier that was not ranked. The first it returns is Start's spare, when
// given; each later one is allocated.
func (r *Ranking) Choice(pos int) *spread.Choice {
	if r.ranked == 0 {
		return nil // the call follows the layout's order: it pays for no more
	}
	return r.choice(pos)
}

// choice is Choice in a call that ranked some tier.
func (r *Ranking) choice(pos int) *spread.Choice {
	l := r.layout
	ti := int(l.of[pos]) // positions keep to their tier's range
	if !r.Ranked(ti) {
		return nil
	}
	t := &l.tiers[ti]
	ch := r.spare
	if ch != nil {
		r.spare = nil
	} else {
		ch = new(spread.Choice)
	}
	*ch = spread.Choice{Strategy: t.strategy, Rank: pos - t.lo + 1, Of: t.hi - t.lo, Figure: r.fig(pos)}
	ch.Affinity = ch.Rank == 1 && r.affine&(1<<ti) != 0
	switch {
	case ch.Rank != 1:
	case t.strategy == spread.Weighted:
		ch.AgainstFigure = t.total // a draw compares with the total
	default:
		// Every other strategy compared the first with the second (a
		// tier that spreads has two members or more).
		ch.Against, ch.AgainstFigure = l.members[r.At(pos+1)].Name, r.fig(pos+1)
	}
	return ch
}

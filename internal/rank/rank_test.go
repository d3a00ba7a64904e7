package rank_test

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/rank"
	"github.com/backstop-llm/backstop/spread"
)

func seeded() *rand.Rand { return rand.New(rand.NewPCG(1, 2)) }

func TestRankOrdered(t *testing.T) {
	order := make([]int, 3)
	c := rank.Rank(spread.Ordered, make([]rank.Candidate, 3), order, nil, seeded())
	if !slices.Equal(order, []int{0, 1, 2}) || c.Rank != 1 || c.Of != 3 || c.String() != "ordered 1/3: in order" {
		t.Fatalf("%v %+v %q", order, c, c)
	}
}

func TestRankLeastLoadedPutsTheLighterOfTwoFirstThenTheRestByLoad(t *testing.T) {
	cands := []rank.Candidate{{Name: "a", InFlight: 5}, {Name: "b", InFlight: 1}, {Name: "c", InFlight: 3}, {Name: "d", InFlight: 0}}
	r := seeded()
	firsts := map[string]int{}
	for range 1000 {
		order := make([]int, len(cands))
		c := rank.Rank(spread.LeastLoaded, cands, order, nil, r)
		first, second := cands[order[0]], cands[order[1]]
		if first.InFlight > second.InFlight || c.Figure != float64(first.InFlight) || c.Against != second.Name || c.AgainstFigure != float64(second.InFlight) {
			t.Fatalf("order %v, choice %+v", order, c)
		}
		rest := order[2:]
		if !slices.IsSortedFunc(rest, func(i, j int) int { return cands[i].InFlight - cands[j].InFlight }) {
			t.Fatalf("the rest are not by load: %v", order)
		}
		firsts[first.Name]++
	}
	// The power of two choices: the most loaded is never first; the least
	// loaded is first whenever it is drawn (half the pairs).
	if firsts["a"] != 0 || firsts["d"] < 400 {
		t.Fatalf("firsts %v", firsts)
	}
}

func TestRankLatencyJudgesByCostAndAssumesTheSlowestForTheUnknown(t *testing.T) {
	cands := []rank.Candidate{
		{Name: "fast-busy", Latency: 100 * time.Millisecond, InFlight: 9}, // cost 1000ms
		{Name: "slow-idle", Latency: 800 * time.Millisecond},              // cost 800ms
		{Name: "new"}, // no latency: the slowest, 800ms
	}
	if got := rank.Figure(spread.Latency, &cands[0], 800*time.Millisecond); got != 1000 {
		t.Fatalf("cost %v; want 1000ms", got)
	}
	order := make([]int, 3)
	for range 100 {
		c := rank.Rank(spread.Latency, cands, order, nil, seeded())
		if cands[order[0]].Name == "fast-busy" {
			t.Fatalf("the costliest was first: %v (%s)", order, c)
		}
	}
}

func TestRankWeightedDrawsByWeightThenHeaviestFirst(t *testing.T) {
	cands := []rank.Candidate{{Name: "a", Weight: 1}, {Name: "b", Weight: 3}, {Name: "c"}} // c counts as 1
	r := seeded()
	firsts := map[string]int{}
	const n = 5000
	for range n {
		order := make([]int, 3)
		c := rank.Rank(spread.Weighted, cands, order, nil, r)
		firsts[cands[order[0]].Name]++
		if c.AgainstFigure != 5 || c.Against != "" {
			t.Fatalf("%+v", c)
		}
		if rest := order[1:]; cands[rest[0]].Weight < cands[rest[1]].Weight && cands[rest[1]].Weight > 1 {
			t.Fatalf("the rest are not heaviest first: %v", order)
		}
	}
	for name, want := range map[string]float64{"a": 0.2, "b": 0.6, "c": 0.2} {
		if got := float64(firsts[name]) / n; got < want-0.03 || got > want+0.03 {
			t.Errorf("%s first %.3f of the time; want %.1f", name, got, want)
		}
	}
}

func TestRankHeadroomMostRoomFirstThenSoonestSlot(t *testing.T) {
	cands := []rank.Candidate{
		{Name: "none-late", RoomKnown: true, Room: 0.2, Wait: 3 * time.Second},
		{Name: "some", RoomKnown: true, Room: 4},
		{Name: "none-soon", RoomKnown: true, Room: -1, Wait: time.Second},
		{Name: "most", RoomKnown: true, Room: 40},
		{Name: "unknown"}, // room for one
	}
	order := make([]int, len(cands))
	c := rank.Rank(spread.Headroom, cands, order, nil, nil)
	var names []string
	for _, i := range order {
		names = append(names, cands[i].Name)
	}
	if !slices.Equal(names, []string{"most", "some", "unknown", "none-soon", "none-late"}) {
		t.Fatalf("order %v", names)
	}
	if c.String() != "headroom 1/5: room for 40, some had 4" {
		t.Fatalf("%q", c)
	}
}

func TestLoadPeakEWMA(t *testing.T) {
	var l rank.Load
	l.Start()
	if l.InFlight() != 1 || l.Latency(0) != 0 {
		t.Fatalf("in flight %d, latency %v", l.InFlight(), l.Latency(0))
	}
	l.End(time.Second, 100*time.Millisecond)
	l.Start()
	l.End(2*time.Second, time.Second) // a slower sample counts at once: the peak
	if got := l.Latency(2 * time.Second); got < time.Second || got > time.Second+time.Microsecond {
		t.Fatalf("after the peak: %v; want 1s", got)
	}
	l.Start()
	l.End(2*time.Second+rank.DefaultDecay, 100*time.Millisecond) // a faster one, a decay time later, pulls it down by 1-1/e
	want := 0.1 + (1-0.1)/2.718281828
	if got := l.Latency(2*time.Second + rank.DefaultDecay).Seconds(); got < want-0.001 || got > want+0.001 {
		t.Fatalf("after a faster sample: %.4fs; want %.4fs", got, want)
	}
	// Left alone, the figure decays, so that the target is tried again.
	if got := l.Latency(2*time.Second + 11*rank.DefaultDecay); got > 20*time.Millisecond {
		t.Fatalf("ten decay times later: %v", got)
	}
	l.Start()
	l.End(0, 0) // no sample
	if l.InFlight() != 0 {
		t.Fatalf("in flight %d", l.InFlight())
	}
}

// Found in review: more candidates than Rank keeps on its stack (eight)
// panicked.
func TestRankMoreThanEightCandidates(t *testing.T) {
	for _, s := range []spread.Strategy{spread.Ordered, spread.Weighted, spread.LeastLoaded, spread.Latency, spread.Headroom} {
		cands := make([]rank.Candidate, 12)
		for i := range cands {
			cands[i] = rank.Candidate{Name: string(rune('a' + i)), Weight: 1, InFlight: 12 - i, Room: float64(i), Latency: time.Duration(12-i) * time.Millisecond}
		}
		order := make([]int, len(cands))
		c := rank.Rank(s, cands, order, nil, seeded())
		sorted := slices.Clone(order)
		slices.Sort(sorted)
		if c.Of != 12 || c.Rank != 1 || !slices.Equal(sorted, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}) {
			t.Errorf("%v: order %v, choice %+v", s, order, c)
		}
	}
}

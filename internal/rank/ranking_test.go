package rank_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/rank"
	"github.com/backstop-llm/backstop/spread"
)

// loaded returns members named a, b, c... with the in-flight counts given.
func loaded(inflight ...int) []rank.Member {
	ms := make([]rank.Member, len(inflight))
	for i, n := range inflight {
		ms[i] = rank.Member{Name: string(rune('a' + i)), Load: &rank.Load{}}
		for range n {
			ms[i].Load.Start()
		}
	}
	return ms
}

func layout(t *testing.T, tiers ...rank.Tier) *rank.Layout {
	t.Helper()
	l, err := rank.NewLayout(time.Now(), tiers...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRankingFollowsTheLayoutUntilItEntersATierThatSpreads(t *testing.T) {
	l := layout(t,
		rank.Tier{Strategy: spread.Ordered, Members: loaded(0, 0)},
		rank.Tier{Strategy: spread.LeastLoaded, Members: loaded(3, 0, 5)},
	)
	var r rank.Ranking
	r.Start(l, nil)
	for pos := range 2 {
		r.Enter(pos)
		if r.At(pos) != pos || r.Choice(pos) != nil || r.Ranked(0) {
			t.Fatalf("position %d of an ordered tier: at %d, choice %v", pos, r.At(pos), r.Choice(pos))
		}
	}
	if r.Ranked(1) || r.At(2) != 2 {
		t.Fatal("the second tier ranked before the call entered it")
	}
	r.Enter(2)
	if !r.Ranked(1) || r.Ranked(0) {
		t.Fatal("entering the second tier did not rank it alone")
	}
	seen := map[int]bool{}
	for pos := 2; pos < 5; pos++ {
		if i := r.At(pos); i < 2 || i > 4 || seen[i] {
			t.Fatalf("position %d holds %d: outside its tier, or twice", pos, i)
		} else {
			seen[i] = true
		}
	}
	if r.At(0) != 0 || r.At(1) != 1 {
		t.Fatal("ranking a tier moved another's positions")
	}
	// The power of two choices never puts the most loaded (c, 5) first.
	first, second := r.Choice(2), r.Choice(3)
	if first.Rank != 1 || first.Of != 3 || second.Rank != 2 || first.Against == "" || first.AgainstFigure != second.Figure || r.At(2) == 4 {
		t.Fatalf("first %+v, second %+v", first, second)
	}
	// Entering again (a restarted stream) keeps the order.
	at := [3]int{r.At(2), r.At(3), r.At(4)}
	for range 20 {
		r.Enter(2)
		if [3]int{r.At(2), r.At(3), r.At(4)} != at {
			t.Fatal("entering a ranked tier again ranked it afresh")
		}
	}
}

func TestRankingWeightedComparesWithTheTotal(t *testing.T) {
	l := layout(t, rank.Tier{Strategy: spread.Weighted, Members: []rank.Member{{Name: "a", Weight: 1e9}, {Name: "b", Weight: 0}, {Name: "c", Weight: 3}}})
	var spare spread.Choice
	var r rank.Ranking
	r.Start(l, &spare)
	r.Enter(0)
	if r.At(0) != 0 || r.At(1) != 2 || r.At(2) != 1 {
		t.Fatalf("order %d %d %d; want a (drawn), then by weight c, b", r.At(0), r.At(1), r.At(2))
	}
	ch := r.Choice(0)
	if ch != &spare || ch.Figure != 1e9 || ch.AgainstFigure != 1e9+1+3 || ch.Against != "" {
		t.Fatalf("%+v; want the spare, weight 1e9 of the total", ch)
	}
	if later := r.Choice(2); later == &spare || later.Figure != 1 || later.Rank != 3 || later.AgainstFigure != 0 {
		t.Fatalf("%+v; want a new Choice, weight 1 (0 counts as 1), rank 3 against none", later)
	}
}

func TestRankingHeadroomReadsTheRoomOfEachMember(t *testing.T) {
	rooms := map[string]float64{"a": 2, "b": 40, "c": 0.5}
	ms := make([]rank.Member, 0, 3)
	for _, name := range []string{"a", "b", "c"} {
		ms = append(ms, rank.Member{Name: name, Room: func(time.Time) (float64, time.Duration) { return rooms[name], time.Second }})
	}
	l := layout(t, rank.Tier{Strategy: spread.Headroom, Members: ms})
	var r rank.Ranking
	r.Start(l, nil)
	r.Enter(0)
	ch := r.Choice(0)
	if got := ch.String(); got != "headroom 1/3: room for 40, a had 2" || r.At(0) != 1 || r.At(2) != 2 {
		t.Fatalf("%q, order %d %d %d", got, r.At(0), r.At(1), r.At(2))
	}
}

func TestRankingMembersWithNoFigures(t *testing.T) {
	for _, s := range []spread.Strategy{spread.LeastLoaded, spread.Latency, spread.Headroom} {
		l := layout(t, rank.Tier{Strategy: s, Members: []rank.Member{{Name: "a"}, {Name: "b"}}})
		var r rank.Ranking
		r.Start(l, nil)
		r.Enter(0)
		if ch := r.Choice(0); ch == nil || ch.Of != 2 || ch.Against == "" {
			t.Fatalf("%v: %+v", s, ch)
		}
	}
}

// A layout of more than eight positions is ranked past the Ranking's own
// arrays, at positions past 127 and in tiers that start there too.
func TestRankingOverManyPositions(t *testing.T) {
	for _, n := range []int{9, 300} {
		ms := loaded(make([]int, n)...)
		for i := range ms {
			ms[i].Name = fmt.Sprint(i)
		}
		l := layout(t,
			rank.Tier{Strategy: spread.Ordered, Members: ms[:n/2]},
			rank.Tier{Strategy: spread.Latency, Members: ms[n/2:]},
		)
		var r rank.Ranking
		r.Start(l, nil)
		for pos := range n {
			r.Enter(pos)
		}
		seen := make([]bool, n)
		for pos := range n {
			i := r.At(pos)
			if seen[i] || (pos < n/2) != (i < n/2) {
				t.Fatalf("%d positions: position %d holds %d", n, pos, i)
			}
			seen[i] = true
		}
		if ch := r.Choice(n / 2); ch == nil || ch.Of != n-n/2 || !strings.HasPrefix(ch.String(), "latency 1/") {
			t.Fatalf("%d positions: %+v", n, ch)
		}
	}
}

// Ranking a tier of up to eight members allocates nothing: the Choice is
// the spare the caller allocated with its own state.
func TestRankingAllocatesNothing(t *testing.T) {
	for _, s := range []spread.Strategy{spread.Weighted, spread.LeastLoaded, spread.Latency, spread.Headroom} {
		ms := loaded(1, 0, 2, 0, 1, 0, 0, 3)
		for i := range ms {
			ms[i].Room = func(time.Time) (float64, time.Duration) { return float64(i), 0 }
		}
		l := layout(t, rank.Tier{Strategy: s, Members: ms})
		var spare spread.Choice
		allocs := testing.AllocsPerRun(100, func() {
			var r rank.Ranking
			r.Start(l, &spare)
			r.Enter(0)
			if r.Choice(0) != &spare || r.At(7) < 0 {
				t.Fatal("no choice")
			}
		})
		if allocs != 0 {
			t.Errorf("%v: ranking eight members allocates %.0f times; want none", s, allocs)
		}
	}
}

func TestNewLayoutRefuses(t *testing.T) {
	if _, err := rank.NewLayout(time.Now(), rank.Tier{Strategy: spread.Headroom + 1}); err == nil || !strings.Contains(err.Error(), "use one of") {
		t.Errorf("an unknown strategy: %v", err)
	}
	if _, err := rank.NewLayout(time.Now(), make([]rank.Tier, 65)...); err == nil || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("65 tiers: %v", err)
	}
	if _, err := rank.NewLayout(time.Now(), make([]rank.Tier, 64)...); err != nil {
		t.Errorf("64 tiers: %v", err)
	}
}

// TestPreferPutsTheWarmMemberFirst: Prefer moves a member of the tier just
// ranked to its front, the strategy's order following, and its Choice
// says Affinity, compared with the strategy's own first; a member of
// another tier, or a tier not just ranked, is left alone.
func TestPreferPutsTheWarmMemberFirst(t *testing.T) {
	rooms := map[string]float64{"a": 2, "b": 40, "c": 0.5, "d": 1, "e": 3}
	ms := make([]rank.Member, 0, 5)
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		ms = append(ms, rank.Member{Name: name, Room: func(time.Time) (float64, time.Duration) { return rooms[name], time.Second }})
	}
	l := layout(t, rank.Tier{Strategy: spread.Headroom, Members: ms[:3]}, rank.Tier{Strategy: spread.Headroom, Members: ms[3:]})
	var r rank.Ranking
	r.Start(l, nil)
	if !r.Enter(0) || r.Enter(0) {
		t.Fatal("Enter reports ranking a tier it ranked, or not ranking one it did")
	}
	r.Prefer(0, 2)
	if [3]int{r.At(0), r.At(1), r.At(2)} != [3]int{2, 1, 0} {
		t.Fatalf("order %d %d %d; want c (warm), then the strategy's b, a", r.At(0), r.At(1), r.At(2))
	}
	if got := r.Choice(0).String(); got != "headroom+affinity 1/3: no room, b had 40" {
		t.Errorf("the warm member's choice: %q", got)
	}
	if ch := r.Choice(1); ch.Affinity || ch.Rank != 2 || ch.Figure != 40 {
		t.Errorf("the strategy's first, second now: %+v", ch)
	}
	r.Prefer(0, 4) // a member of the next tier
	r.Prefer(3, 3) // a tier not ranked yet
	if r.At(0) != 2 || r.At(3) != 3 || r.Ranked(1) {
		t.Fatal("Prefer moved a member outside the tier it ranked")
	}
	r.Enter(3)
	if ch := r.Choice(3); ch.Affinity || r.At(3) != 4 {
		t.Errorf("the next tier, not preferred: at %d, %+v", r.At(3), ch)
	}
}

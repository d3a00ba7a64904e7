package rank_test

import (
	"errors"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/internal/rank"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/spread"
)

// TestCompileGroupsRunsOfTargets: each run of one group is one Group, its
// targets given load figures only where the strategy reads them, a tier's
// hedging one budget made once for the tier, a target's own hedging its
// own; a layout only when a group spreads.
func TestCompileGroupsRunsOfTargets(t *testing.T) {
	var made []string
	newBudget := func(target string) budget.Budget { made = append(made, target); return budget.Unlimited() }
	setups := [rank.Groups]rank.Setup{
		rank.Deployments: {Strategy: spread.LeastLoaded, Hedge: hedge.Config{Delay: time.Second}},
	}
	es := []rank.Entry{
		{Name: "a", Group: rank.Deployments},
		{Name: "b", Group: rank.Deployments},
		{Name: "c", Group: rank.Siblings, Hedge: hedge.Config{Delay: time.Second}},
	}
	g, err := rank.Compile(time.Now(), &setups, es, newBudget)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := g.Places[0], g.Places[1], g.Places[2]
	if a.Group != b.Group || a.Group == c.Group || a.Group.Name != "deployment" || c.Group.Name != "sibling" ||
		a.Group.Lo != 0 || a.Group.Hi != 2 || c.Group.Index != 1 || c.Group.Lo != 2 || c.Group.Hi != 3 {
		t.Fatalf("groups: %+v %+v", *a.Group, *c.Group)
	}
	if a.Load == nil || b.Load == nil || c.Load != nil {
		t.Errorf("loads %v %v %v: want one for the LeastLoaded tier's targets only", a.Load, b.Load, c.Load)
	}
	if a.Hedge == nil || a.Hedge.ShareKey != "tier:deployment" || b.Hedge.ShareKey != "tier:deployment" || c.Hedge.ShareKey != "c" {
		t.Errorf("hedging: %+v %+v %+v", a.Hedge, b.Hedge, c.Hedge)
	}
	if len(made) != 2 || made[0] != "" || made[1] != "c" {
		t.Errorf("budgets made for %q; want the tier's once, then c's own", made)
	}
	if g.Layout == nil || len(g.Warnings) != 1 {
		t.Errorf("layout %v, warnings %q: want a layout and a warning that c hedges alone", g.Layout, g.Warnings)
	}
	ordered, _ := rank.Compile(time.Now(), &[rank.Groups]rank.Setup{}, es[:2], newBudget)
	if ordered.Layout != nil || ordered.Places[0].Load != nil || ordered.Places[0].Hedge != nil || ordered.Places[0].Group.Window != nil {
		t.Errorf("an ordered, unhedged tier: %+v", ordered.Places[0])
	}
}

// TestGroupSample: a Latency tier's load samples an answer or a timeout,
// not another failure; the tier's window samples acceptable whole
// answers and first chunks only.
func TestGroupSample(t *testing.T) {
	g := &rank.Group{Strategy: spread.Latency, Window: &latency.Window{}}
	l := &rank.Load{}
	l.Start()
	g.Sample(l, 0, time.Second, errors.New("boom"), false)
	if l.InFlight() != 0 || l.Latency(time.Second) != 0 || g.Window.Len() != 0 {
		t.Fatalf("a failure: in flight %d, latency %v, window %d; want 0, no sample", l.InFlight(), l.Latency(time.Second), g.Window.Len())
	}
	g.Sample(l, 0, time.Second, &llm.Error{Kind: llm.KindTimeout}, false)
	if l.Latency(time.Second) == 0 || g.Window.Len() != 0 {
		t.Fatalf("a timeout: latency %v, window %d; want a latency sample only", l.Latency(time.Second), g.Window.Len())
	}
	g.Sample(nil, 0, time.Second, nil, true)
	g.Sample(nil, 0, time.Second, nil, false)
	var firsts latency.Window
	g.FirstChunk(&firsts, time.Second)
	g.FirstChunk(nil, time.Second)
	if g.Window.Len() != 3 || firsts.Len() != 1 {
		t.Errorf("window %d, firsts %d; want 3 (a whole answer, two first chunks) and 1", g.Window.Len(), firsts.Len())
	}
}

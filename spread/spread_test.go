package spread_test

import (
	"testing"

	"github.com/backstop-llm/backstop/spread"
)

func TestChoiceString(t *testing.T) {
	for _, tc := range []struct {
		c    spread.Choice
		want string
	}{
		{spread.Choice{Strategy: spread.LeastLoaded, Rank: 1, Of: 3, Figure: 2, Against: "eu-1", AgainstFigure: 7}, "least-loaded 1/3: 2 in flight, eu-1 had 7"},
		{spread.Choice{Strategy: spread.LeastLoaded, Rank: 2, Of: 3, Figure: 7}, "least-loaded 2/3: 7 in flight"},
		{spread.Choice{Strategy: spread.Latency, Rank: 1, Of: 2, Figure: 1234.4, Against: "b", AgainstFigure: 2000.6}, "latency 1/2: cost 1234ms, b had 2001ms"},
		{spread.Choice{Strategy: spread.Weighted, Rank: 1, Of: 3, Figure: 2, AgainstFigure: 4}, "weighted 1/3: weight 2 of 4"},
		{spread.Choice{Strategy: spread.Headroom, Rank: 2, Of: 2, Figure: 0.5}, "headroom 2/2: no room"},
		{spread.Choice{Strategy: spread.LeastLoaded, Affinity: true, Rank: 1, Of: 3, Figure: 4, Against: "eu-1", AgainstFigure: 2}, "least-loaded+affinity 1/3: 4 in flight, eu-1 had 2"},
		{spread.Choice{Strategy: spread.Weighted, Affinity: true, Rank: 1, Of: 2, Figure: 1, AgainstFigure: 2}, "weighted+affinity 1/2: weight 1 of 2"},
		{spread.Choice{Strategy: spread.Strategy(9), Rank: 1, Of: 1}, "strategy(9) 1/1: in order"},
	} {
		if got := tc.c.String(); got != tc.want {
			t.Errorf("%+v: %q; want %q", tc.c, got, tc.want)
		}
	}
}

func TestStrategyNames(t *testing.T) {
	for s, want := range map[spread.Strategy]string{spread.Ordered: "ordered", spread.Weighted: "weighted", spread.LeastLoaded: "least-loaded", spread.Latency: "latency", spread.Headroom: "headroom"} {
		if s.String() != want {
			t.Errorf("%d: %q", s, s)
		}
	}
	if got := spread.Strategy(5).String(); got != "strategy(5)" {
		t.Errorf("an unknown strategy is named %q", got)
	}
}

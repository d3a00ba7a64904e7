package bench

// The healthy path with spreading on: one call through a tier of three
// healthy in-process deployments, ordered (the chain as it always was)
// against each spreading strategy, and hedging on but never needed. Each
// is compared with the ordered chain measured in the same run.

import (
	"context"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/spread"
)

// tier builds a chain over three deployments of the healthy provider,
// configured by setup.
func tier(tb testing.TB, setup func(*chain.Builder)) *chain.Chain {
	b := chain.New("bench")
	setup(b)
	c, err := b.Primary(chain.Target{Name: "eu-1", Provider: provider, Model: "claude-sonnet-5-5", Weight: 3}).
		OrDeployment(chain.Target{Name: "eu-2", Provider: provider, Model: "claude-sonnet-5-5", Weight: 2}).
		OrDeployment(chain.Target{Name: "eu-3", Provider: provider, Model: "claude-sonnet-5-5", Weight: 1}).
		OrDegrade(degrade.Static(static)).
		Build()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func tierSetups() []struct {
	name  string
	setup func(*chain.Builder)
} {
	return []struct {
		name  string
		setup func(*chain.Builder)
	}{
		{"ordered", func(*chain.Builder) {}},
		{"weighted", func(b *chain.Builder) { b.Spread(spread.Weighted) }},
		{"least-loaded", func(b *chain.Builder) { b.Spread(spread.LeastLoaded) }},
		{"latency", func(b *chain.Builder) { b.Spread(spread.Latency) }},
		// Hedging on, with a delay no healthy call reaches: the price of
		// being ready to hedge (a goroutine and a timer per attempt).
		{"hedge-armed", func(b *chain.Builder) { b.Hedge(hedge.Config{Delay: time.Minute}) }},
	}
}

func BenchmarkSpread(b *testing.B) {
	for _, s := range tierSetups() {
		b.Run(s.name, func(b *testing.B) { calls(b, tier(b, s.setup)) })
	}
}

// TestSpreadSetupsAnswer checks that every benchmarked chain answers from
// its tier.
func TestSpreadSetupsAnswer(t *testing.T) {
	for _, s := range tierSetups() {
		res, err := tier(t, s.setup).Call(context.Background(), request)
		if err != nil || res.Text != "ok" || res.Degraded {
			t.Fatalf("%s: %v %+v", s.name, err, res)
		}
	}
}

var _ llm.Provider = provider

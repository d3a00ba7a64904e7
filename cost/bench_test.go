package cost_test

import (
	"testing"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
)

var sinkCost cost.Cost

// BenchmarkOf is the pricing of one answer's usage, which every attempt
// of every call pays.
func BenchmarkOf(b *testing.B) {
	u := llm.Usage{InputTokens: 12_000, CacheReadTokens: 10_000, OutputTokens: 800}
	b.ReportAllocs()
	for b.Loop() {
		sinkCost = cost.Of(u, sonnet)
	}
}

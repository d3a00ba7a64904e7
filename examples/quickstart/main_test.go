package main

import (
	"testing"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
)

// TestLedgerSplitsACallsCostByDecision: the attempt that served is the
// answer's cost; every other is what the incident added, by the decision
// taken after it (a re-ask is a retry of an invalid answer); skips and
// unbilled failures add nothing and are listed apart; flags carry over.
func TestLedgerSplitsACallsCostByDecision(t *testing.T) {
	usd := func(d float64) cost.Cost { return cost.Cost{Spent: cost.Dollars(d)} }
	res := &chain.Result{Attempts: []chain.Attempt{
		{Target: "sonnet", N: 1, Decision: chain.DecisionRetry, Kind: llm.KindOverloaded},
		{Target: "sonnet", N: 2, Decision: chain.DecisionRetry, Kind: llm.KindInvalidOutput, Cost: usd(0.002)},
		{Target: "sonnet", N: 3, Decision: chain.DecisionNext, Kind: llm.KindInvalidOutput, Cost: usd(0.0021)},
		{Target: "eu-2", Decision: chain.DecisionSkip},
		{Target: "haiku", N: 1, Decision: chain.DecisionLost, Kind: llm.KindCanceled, Cost: cost.Cost{Spent: cost.Dollars(0.0004), Estimated: true}},
		{Target: "gpt", N: 1, Decision: chain.DecisionServed, Hedge: true, Cost: usd(0.001)},
	}}
	var l ledger
	l.add(res)
	if l.total() != res.Cost() {
		t.Errorf("total %v, Result.Cost %v", l.total(), res.Cost())
	}
	want := "the answer $0.001; the incident added ~$0.0045: 1 re-ask $0.002, 1 fallback $0.0021, 1 lost hedge ~$0.0004 (1 retry: not billed, no answer came)"
	if got := l.say("the answer"); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	l.add(res)
	if got := l.by[reasked].n; got != 2 {
		t.Errorf("two calls' re-asks: %d", got)
	}
}

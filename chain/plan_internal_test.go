package chain

import (
	"testing"

	"github.com/backstop-llm/backstop/internal/plan"
)

// TestDecisionOf: every decision of the planner is recorded as the
// chain's decision of the same name, and none as DecisionNone.
func TestDecisionOf(t *testing.T) {
	for d, want := range map[plan.Decision]Decision{plan.Retry: DecisionRetry, plan.Next: DecisionNext, plan.Stop: DecisionStop} {
		if got := decisionOf(d); got != want {
			t.Errorf("decisionOf(%d) = %v, want %v", d, got, want)
		}
	}
	if got := decisionOf(0); got != DecisionNone {
		t.Errorf("decisionOf(0) = %v, want none", got)
	}
}

package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// decisionTable is DESIGN.md's decision table, written out independently
// of retry.DefaultTable: for each kind, how many attempts it gets on one
// target under the default policy (3) and what follows leaving it.
var decisionTable = map[llm.Kind]struct {
	attempts int
	next     string // "next", "stop", "larger" (context window), "if allowed"
}{
	llm.KindUnknown:       {1, "next"},
	llm.KindRateLimited:   {3, "next"},
	llm.KindQuota:         {1, "next"},
	llm.KindOverloaded:    {3, "next"},
	llm.KindServer:        {3, "next"},
	llm.KindTimeout:       {3, "next"},
	llm.KindConnection:    {3, "next"},
	llm.KindConflict:      {3, "next"},
	llm.KindContextLength: {1, "larger"},
	llm.KindContentFilter: {1, "if allowed"},
	llm.KindAuth:          {1, "next"},
	llm.KindNotFound:      {1, "next"},
	llm.KindBadRequest:    {1, "stop"},
	llm.KindInvalidOutput: {2, "next"},
	llm.KindCanceled:      {1, "stop"},
}

// TestPlan covers every Kind x (attempts left, Retry-After, deadline,
// x-should-retry, content fallback) against the decision Table: whether
// plan retries, how long it waits, whether it moves on or stops, and
// whether a Retry-After not waited out closes the gate.
func TestPlan(t *testing.T) {
	if len(decisionTable) != llm.NumKinds {
		t.Fatalf("the test's table has %d kinds; llm has %d", len(decisionTable), llm.NumKinds)
	}
	policy := retry.Policy{}.WithDefaults()
	const backoff = 700 * time.Millisecond
	yes, no := true, false
	cases := 0
	for kind := llm.Kind(0); int(kind) < llm.NumKinds; kind++ {
		row := decisionTable[kind]
		for _, n := range []int{1, 2, 3} {
			for _, ra := range []time.Duration{0, 5 * time.Second, time.Minute} {
				for _, dl := range []string{"none", "ample", "short"} {
					for _, sr := range []*bool{nil, &yes, &no} {
						for _, cf := range []bool{false, true} {
							cases++
							f := Failure{Kind: kind, N: n, RetryAfter: ra, ShouldRetry: sr, Invalid: kind == llm.KindInvalidOutput}
							l := Limits{Table: retry.DefaultTable(), Policy: policy, Backoff: max(backoff, ra), ContentFallback: cf}
							switch dl {
							case "ample":
								l.Left, l.HasDeadline = time.Hour, true
							case "short":
								l.Left, l.HasDeadline = 100*time.Millisecond, true
							}
							got := Decide(f, l)
							name := fmt.Sprintf("%v n=%d retry-after=%v deadline=%s should-retry=%v content-fallback=%v",
								kind, n, ra, dl, boolOf(sr), cf)

							allowed := row.attempts
							if sr != nil && *sr {
								allowed = policy.MaxAttempts
								if kind == llm.KindInvalidOutput {
									allowed = 2
								}
							} else if sr != nil && !*sr {
								allowed = 1
							}
							wait := max(backoff, ra)
							if f.Invalid {
								wait = 0
							}
							retries := n < allowed && ra <= policy.MaxRetryAfter && !(dl == "short" && wait > l.Left)
							if retries {
								if got.Decision != Retry || got.Wait != wait || got.CloseGate {
									t.Errorf("%s: got %+v; want a retry after %v", name, got, wait)
								}
								continue
							}
							want := Next
							switch {
							case row.next == "stop", row.next == "if allowed" && !cf:
								want = Stop
							}
							// The gate closes only for a wait calls will not
							// take: over MaxRetryAfter, or past the deadline.
							closes := ra > policy.MaxRetryAfter || dl != "none" && ra > l.Left
							if got.Decision != want || got.Wait != 0 || got.CloseGate != closes || got.Reason == "" {
								t.Errorf("%s: got %+v; want %v, closing the gate %v, with a reason", name, got, want, closes)
							}
							if want == Next && !strings.Contains(got.Reason, reasonFor(n, allowed, ra, policy)) {
								t.Errorf("%s: reason %q", name, got.Reason)
							}
						}
					}
				}
			}
		}
	}
	t.Logf("%d cases", cases)
}

// TestPlanElsewhere: in a tier that spreads, a retry goes to another
// target of the tier first, without a wait, and a Retry-After not waited
// out closes this target's gate; unless the next-target column keeps the
// call on this target, where it retries in place. Found in review: the
// walk used to override plan's retry with a step of its own that skipped
// the column.
func TestPlanElsewhere(t *testing.T) {
	policy := retry.Policy{}.WithDefaults()
	for _, tc := range []struct {
		name  string
		table retry.Table
		ra    time.Duration
		want  Step
	}{
		{"server error", retry.DefaultTable(), 0,
			Step{Decision: Next, Reason: "retried on another deployment target first"}},
		{"rate limited with a retry-after calls will wait", retry.DefaultTable(), 5 * time.Second,
			Step{Decision: Next, Reason: "retried on another deployment target first"}},
		{"a rule that retries and never falls back", retry.Policy{Rules: map[llm.Kind]retry.Rule{llm.KindServer: {Retry: true, Fallback: retry.Stop}}}.Table(), 0,
			Step{Decision: Retry, Wait: time.Second}},
	} {
		kind := llm.KindServer
		if tc.ra > 0 {
			kind = llm.KindRateLimited
		}
		f := Failure{Kind: kind, N: 1, RetryAfter: tc.ra}
		got := Decide(f, Limits{Table: tc.table, Policy: policy, Backoff: time.Second, Elsewhere: "deployment"})
		if got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
		// Out of attempts, the table decides as it would anywhere.
		f.N = policy.MaxAttempts
		if got, want := Decide(f, Limits{Table: tc.table, Policy: policy, Elsewhere: "deployment"}), Decide(f, Limits{Table: tc.table, Policy: policy}); got != want {
			t.Errorf("%s, out of attempts: got %+v, want %+v", tc.name, got, want)
		}
	}
}

// reasonFor is the start of the reason plan gives for leaving.
func reasonFor(n, allowed int, ra time.Duration, p retry.Policy) string {
	switch {
	case n >= allowed && allowed <= 1:
		return "is not retried"
	case n >= allowed:
		return fmt.Sprintf("%d of %d attempts used", n, allowed)
	case ra > p.MaxRetryAfter:
		return "exceeds MaxRetryAfter"
	}
	return "would end past the deadline"
}

func boolOf(b *bool) string {
	if b == nil {
		return "absent"
	}
	return fmt.Sprint(*b)
}

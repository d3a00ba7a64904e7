package retry

import (
	"cmp"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

func TestPolicyDefaults(t *testing.T) {
	p := Policy{}.WithDefaults()
	want := Policy{MaxAttempts: 3, Base: 500 * time.Millisecond, Cap: 20 * time.Second,
		Pad: time.Second, MaxRetryAfter: 30 * time.Second, Jitter: FullJitter}
	if p.MaxAttempts != want.MaxAttempts || p.Base != want.Base || p.Cap != want.Cap || p.Pad != want.Pad ||
		p.MaxRetryAfter != want.MaxRetryAfter || p.Jitter != want.Jitter {
		t.Fatalf("defaults = %+v, want %+v", p, want)
	}
	if p := (Policy{Pad: -1}).WithDefaults(); p.WithDefaults().Pad != p.Pad {
		t.Fatalf("WithDefaults must be idempotent and keep a negative Pad meaning none: %+v", p)
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := (Policy{}).Validate(); err != nil {
		t.Fatalf("zero policy: %v", err)
	}
	err := Policy{MaxAttempts: -1, Base: -time.Second, Cap: -1, MaxRetryAfter: -1, Jitter: 9}.Validate()
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("want llm.ErrInvalidConfig, got %v", err)
	}
	for _, field := range []string{"MaxAttempts", "Base", "Cap", "MaxRetryAfter", "Jitter"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	err = Policy{Rules: map[llm.Kind]Rule{llm.KindTimeout: {Attempts: -1}, llm.Kind(99): {}, llm.KindServer: {Fallback: 9}}}.Validate()
	for _, s := range []string{"Rules[timeout].Attempts is -1", "Kind(99)", "Rules[server].Fallback"} {
		if err == nil || !strings.Contains(err.Error(), s) {
			t.Errorf("Rules validation lacks %q: %v", s, err)
		}
	}
	if err := (Policy{Base: time.Minute, Cap: time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "below Base") {
		t.Fatalf("Cap < Base: %v", err)
	}
}

func TestDefaultTable(t *testing.T) {
	tab := DefaultTable()
	cases := []struct {
		k        llm.Kind
		attempts int
		breaker  BreakerVerdict
		fallback Fallback
	}{
		{llm.KindRateLimited, 3, NotFailure, Next},
		{llm.KindQuota, 1, Trip, Next},
		{llm.KindOverloaded, 3, Failure, Next},
		{llm.KindServer, 3, Failure, Next},
		{llm.KindTimeout, 3, Failure, Next},
		{llm.KindConnection, 3, Failure, Next},
		{llm.KindConflict, 3, NotFailure, Next},
		{llm.KindContextLength, 1, NotFailure, LargerContext},
		{llm.KindContentFilter, 1, NotFailure, IfAllowed},
		{llm.KindAuth, 1, Failure, Next},
		{llm.KindNotFound, 1, Failure, Next},
		{llm.KindBadRequest, 1, NotFailure, Stop},
		{llm.KindInvalidOutput, 2, NotFailure, Next},
		{llm.KindCanceled, 1, Excluded, Stop},
		{llm.KindUnknown, 1, Failure, Next},
	}
	if len(cases) != llm.NumKinds {
		t.Fatalf("test covers %d kinds of %d", len(cases), llm.NumKinds)
	}
	for _, c := range cases {
		r := tab.Rule(c.k)
		got := 1 // the attempts of a target under the default policy (3 at most)
		if r.Retry {
			got = cmp.Or(r.Attempts, 3)
		}
		if got != c.attempts || r.Breaker != c.breaker || r.Fallback != c.fallback {
			t.Errorf("%v: attempts %d breaker %v fallback %v; want %d %v %v",
				c.k, got, r.Breaker, r.Fallback, c.attempts, c.breaker, c.fallback)
		}
	}
	p5 := Policy{Rules: map[llm.Kind]Rule{llm.KindBadRequest: {Fallback: Next}}}
	if p5.Table().Rule(llm.KindBadRequest).Fallback != Next {
		t.Error("Policy.Rules not applied by Table")
	}
	if tab.Rule(llm.Kind(200)) != tab.Rule(llm.KindUnknown) {
		t.Error("out-of-range kind should read the Unknown row")
	}
}

// TestDefaultTableHasARowForEveryKind: every kind's row of the default
// decision table says something (no row of today's is the zero Rule), so a
// kind added without its row fails here instead of behaving as "not
// retried, not a failure, next target" unseen.
func TestDefaultTableHasARowForEveryKind(t *testing.T) {
	table := DefaultTable()
	for k := range llm.NumKinds {
		if table[k] == (Rule{}) {
			t.Errorf("kind %v has no row in DefaultTable", llm.Kind(k))
		}
	}
}

// TestDefaultTableHasAVerdictForEveryKind: every kind's row says what a
// service answers its caller when a call ends on it; VerdictOK, the zero
// value, is what a row that forgot its Verdict would have, and a new kind
// would fall through to it unseen.
func TestDefaultTableHasAVerdictForEveryKind(t *testing.T) {
	tab := DefaultTable()
	for k := range llm.NumKinds {
		if v := tab[k].Verdict; v == VerdictOK || v > VerdictCanceled {
			t.Errorf("DefaultTable's row for %v has no verdict (%v)", llm.Kind(k), v)
		}
	}
	want := map[llm.Kind]Verdict{
		llm.KindRateLimited: VerdictRetryLater, llm.KindQuota: VerdictUnavailable, llm.KindAuth: VerdictUnavailable,
		llm.KindContextLength: VerdictBadRequest, llm.KindBadRequest: VerdictBadRequest, llm.KindCanceled: VerdictCanceled,
		llm.KindUnknown: VerdictRetryLater, llm.KindInvalidOutput: VerdictRetryLater,
	}
	for k, v := range want {
		if got := tab.Rule(k).Verdict; got != v {
			t.Errorf("%v: verdict %v; want %v", k, got, v)
		}
	}
	for v, status := range map[Verdict]int{VerdictOK: 200, VerdictRetryLater: 503, VerdictBadRequest: 400,
		VerdictUnavailable: 502, VerdictCanceled: 499, VerdictOverBudget: 429, VerdictOverBudget + 1: 500} {
		if got := v.HTTPStatus(); got != status {
			t.Errorf("%v.HTTPStatus() = %d; want %d", v, got, status)
		}
	}
}

// TestRulesKeepTheVerdict: a row of Policy.Rules without a Verdict keeps
// the default row's; one that sets another fails Validate, since a call's
// error is mapped with DefaultTable whichever target failed.
func TestRulesKeepTheVerdict(t *testing.T) {
	p := Policy{Rules: map[llm.Kind]Rule{llm.KindQuota: {Retry: true, Breaker: Failure}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if v := p.Table().Rule(llm.KindQuota).Verdict; v != VerdictUnavailable {
		t.Errorf("a Rules row without a Verdict: %v; want the default row's, unavailable", v)
	}
	p.Rules[llm.KindQuota] = Rule{Verdict: VerdictRetryLater}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "Rules[quota].Verdict") {
		t.Errorf("a Rules row with another Verdict: %v; want an error naming Rules[quota].Verdict", err)
	}
}

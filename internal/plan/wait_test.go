package plan

import (
	"testing"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

func TestWaitNoPad(t *testing.T) {
	if p := (retry.Policy{Pad: -1}).WithDefaults(); Wait(p, 0, 0, time.Second) != time.Second {
		t.Fatalf("a negative Pad means none: %+v", p)
	}
}

func TestBackoffBounds(t *testing.T) {
	base, capd := 500*time.Millisecond, 20*time.Second
	for n := range 70 {
		exp := capd
		if n < 6 {
			exp = base << n
		}
		for range 200 {
			if d := backoff(retry.Policy{Jitter: retry.NoJitter}, n, 0); d != exp {
				t.Fatalf("no jitter n=%d: %v want %v", n, d, exp)
			}
			if d := backoff(retry.Policy{}, n, 0); d < 0 || d > exp {
				t.Fatalf("full jitter n=%d: %v outside [0, %v]", n, d, exp)
			}
			if d := backoff(retry.Policy{Jitter: retry.EqualJitter}, n, 0); d < exp/2 || d > exp {
				t.Fatalf("equal jitter n=%d: %v outside [%v, %v]", n, d, exp/2, exp)
			}
		}
	}
	prev := time.Duration(0)
	for n := range 50 {
		d := backoff(retry.Policy{Jitter: retry.DecorrelatedJitter}, n, prev)
		lo, hi := base, min(capd, 3*max(prev, base))
		if d < lo || d > hi {
			t.Fatalf("decorrelated n=%d prev=%v: %v outside [%v, %v]", n, prev, d, lo, hi)
		}
		prev = d
	}
}

func TestFullJitterSpreads(t *testing.T) {
	// 1000 draws of U(0, 1s) must not bunch: every tenth of the range gets
	// some of them (the chance that one is empty is ~1000 * 0.9^1000).
	var buckets [10]int
	for range 1000 {
		d := backoff(retry.Policy{Base: time.Second}, 0, 0)
		buckets[min(9, int(d/(100*time.Millisecond)))]++
	}
	for i, c := range buckets {
		if c == 0 {
			t.Fatalf("bucket %d empty: %v", i, buckets)
		}
	}
}

func TestWaitHonoursRetryAfterAsFloor(t *testing.T) {
	p := retry.Policy{}
	for range 1000 {
		d := Wait(p, 0, 0, 4*time.Second)
		if d < 4*time.Second || d > 5*time.Second {
			t.Fatalf("wait %v outside [4s, 5s]", d)
		}
	}
	if d := Wait(retry.Policy{Pad: -1}, 3, 0, 4*time.Second); d != 4*time.Second {
		t.Fatalf("no pad: %v", d)
	}
	if d := Wait(retry.Policy{Jitter: retry.NoJitter}, 1, 0, 0); d != time.Second {
		t.Fatalf("no retry-after: backoff expected, got %v", d)
	}
}

func TestAttempts(t *testing.T) {
	tab := retry.DefaultTable()
	p := retry.Policy{}
	yes, no := true, false
	for k, want := range map[llm.Kind]int{
		llm.KindRateLimited: 3, llm.KindQuota: 1, llm.KindOverloaded: 3, llm.KindServer: 3,
		llm.KindTimeout: 3, llm.KindConnection: 3, llm.KindConflict: 3, llm.KindContextLength: 1,
		llm.KindContentFilter: 1, llm.KindAuth: 1, llm.KindNotFound: 1, llm.KindBadRequest: 1,
		llm.KindInvalidOutput: 2, llm.KindCanceled: 1, llm.KindUnknown: 1,
	} {
		if got := Attempts(tab, k, p, nil); got != want {
			t.Errorf("%v: %d attempts, want %d", k, got, want)
		}
	}
	if got := Attempts(tab, llm.KindBadRequest, p, &yes); got != 3 {
		t.Errorf("x-should-retry: true on a 400: %d attempts, want 3", got)
	}
	if got := Attempts(tab, llm.KindOverloaded, p, &no); got != 1 {
		t.Errorf("x-should-retry: false on a 529: %d attempts, want 1", got)
	}
	if got := Attempts(tab, llm.KindServer, retry.Policy{MaxAttempts: 1}, nil); got != 1 {
		t.Errorf("MaxAttempts 1: %d", got)
	}
	p4 := retry.Policy{MaxAttempts: 4, Rules: map[llm.Kind]retry.Rule{llm.KindTimeout: {Retry: true, Attempts: 5}}}
	if got := Attempts(p4.Table(), llm.KindTimeout, p4, nil); got != 4 {
		t.Errorf("row Attempts is bounded by MaxAttempts: got %d", got)
	}
	p5 := retry.Policy{MaxAttempts: 5, Rules: map[llm.Kind]retry.Rule{llm.KindRateLimited: {Retry: true, Attempts: 2}, llm.KindBadRequest: {Fallback: retry.Next}}}
	pt := p5.Table()
	if Attempts(pt, llm.KindRateLimited, p5, nil) != 2 || Attempts(pt, llm.KindServer, p5, nil) != 5 || pt.Rule(llm.KindBadRequest).Fallback != retry.Next {
		t.Error("Policy.Rules not applied by Table")
	}
}

func BenchmarkBackoff(b *testing.B) {
	b.ReportAllocs()
	p := retry.Policy{}
	for b.Loop() {
		_ = backoff(p, 3, 0)
	}
}

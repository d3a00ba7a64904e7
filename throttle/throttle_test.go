package throttle_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/throttle"
)

func mustNew(t *testing.T, s throttle.Settings) *throttle.Limiter {
	t.Helper()
	l, err := throttle.New(s)
	if err != nil || l == nil {
		t.Fatalf("New: %v %v", l, err)
	}
	return l
}

func TestZeroSettingsAreOff(t *testing.T) {
	if l, err := throttle.New(throttle.Settings{}); l != nil || err != nil {
		t.Fatalf("zero settings: %v %v", l, err)
	}
}

func TestValidate(t *testing.T) {
	_, err := throttle.New(throttle.Settings{RequestsPerMinute: -1, Burst: -1, Backoff: 1.5, MaxWait: -1})
	if !errors.Is(err, throttle.ErrInvalidSettings) {
		t.Fatalf("got %v", err)
	}
	for _, s := range []string{"RequestsPerMinute", "Burst", "Backoff", "MaxWait"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %s: %v", s, err)
		}
	}
}

func TestKnownLimitPacesRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Settings{RequestsPerMinute: 60})
		now := time.Now()
		for i := range 5 {
			wait, _ := l.Reserve(now, 0)
			if want := time.Duration(i) * time.Second; wait != want {
				t.Fatalf("request %d waits %v, want %v", i, wait, want)
			}
		}
	})
}

func TestCancelGivesTheSlotBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Settings{RequestsPerMinute: 60})
		now := time.Now()
		l.Reserve(now, 0)
		wait, r := l.Reserve(now, 0)
		r.Cancel(now)
		if again, _ := l.Reserve(now, 0); again != wait {
			t.Fatalf("after a cancel the next slot is %v away, want %v", again, wait)
		}
	})
}

func TestA429SlowsThenRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Settings{RequestsPerMinute: 60})
		backoff := float64(throttle.DefaultBackoff)
		l.Observe(time.Now(), llm.RateLimit{}, true)
		if f := l.Factor(); f != backoff {
			t.Fatalf("factor after a 429: %v", f)
		}
		// The bucket was drained: the next slot is one slowed interval away.
		wait, _ := l.Reserve(time.Now(), 0)
		if want := time.Duration(1e9 / backoff); wait < want-time.Millisecond || wait > want+time.Millisecond {
			t.Fatalf("wait after a 429: %v, want about %v", wait, want)
		}
		time.Sleep(throttle.DefaultRecovery)
		l.Reserve(time.Now(), 0)
		if f := l.Factor(); f != 1 {
			t.Fatalf("factor after Recovery: %v", f)
		}
		for range 20 {
			l.Observe(time.Now(), llm.RateLimit{}, true)
		}
		if f := l.Factor(); f != throttle.MinFactor {
			t.Fatalf("factor floor: %v", f)
		}
	})
}

func TestHeadersCapWhatTheLimiterHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Settings{RequestsPerMinute: 600, Burst: 50})
		// The limiter thinks 50 slots are free; the provider says 0 remain.
		l.Observe(time.Now(), llm.RateLimit{Requests: llm.Allowance{Limit: 600, Remaining: 0}}, false)
		if wait, _ := l.Reserve(time.Now(), 0); wait != 100*time.Millisecond {
			t.Fatalf("wait with nothing remaining: %v, want one interval (100ms)", wait)
		}
	})
}

func TestLearnTakesTheLimitFromHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Settings{Learn: true})
		if wait, _ := l.Reserve(time.Now(), 0); wait != 0 {
			t.Fatalf("unknown limit should not wait: %v", wait)
		}
		l.Observe(time.Now(), llm.RateLimit{Requests: llm.Allowance{Limit: 120, Remaining: 1}}, false)
		now := time.Now()
		waits := []time.Duration{}
		for range 3 {
			w, _ := l.Reserve(now, 0)
			waits = append(waits, w)
		}
		if waits[0] != 0 || waits[1] != 500*time.Millisecond || waits[2] != time.Second {
			t.Fatalf("waits %v, want 0 500ms 1s (120 per minute, one remaining)", waits)
		}
	})
}

func TestTokensPerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Settings{TokensPerMinute: 6000}) // 100 per second
		now := time.Now()
		l.Reserve(now, 100)
		if wait, _ := l.Reserve(now, 300); wait != 3*time.Second {
			t.Fatalf("wait for 300 tokens after 100: %v, want 3s", wait)
		}
		if n := throttle.EstimateTokens(llm.Request{System: "abcd", Messages: []llm.Message{{Content: "abcdefgh"}},
			Params: llm.Params{MaxTokens: 10}}); n != 14 {
			t.Fatalf("estimate %d", n)
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Settings{RequestsPerMinute: 6000, Learn: true})
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				for range 10 {
					w, r := l.Reserve(time.Now(), 10)
					if w > time.Second {
						r.Cancel(time.Now())
					}
					l.Observe(time.Now(), llm.RateLimit{Requests: llm.Allowance{Limit: 6000, Remaining: 50}}, i%10 == 0)
				}
			})
		}
		wg.Wait()
	})
}

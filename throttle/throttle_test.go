package throttle_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/throttle"
)

func mustNew(t *testing.T, s throttle.Config) *throttle.Limiter {
	t.Helper()
	l, err := throttle.New(s)
	if err != nil || l == nil {
		t.Fatalf("New: %v %v", l, err)
	}
	return l
}

func TestDisabledIsOff(t *testing.T) {
	if l, err := throttle.New(throttle.Config{Disabled: true}); l != nil || err != nil {
		t.Fatalf("Disabled: %v %v", l, err)
	}
	if l, err := throttle.New(throttle.Config{}); l == nil || err != nil {
		t.Fatalf("the zero Config: %v %v; want a limiter", l, err)
	}
	_, err := throttle.New(throttle.Config{Disabled: true, RequestsPerMinute: 50})
	if !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), "Disabled") {
		t.Fatalf("Disabled beside a limit: %v, want an invalid configuration naming Disabled", err)
	}
}

// The zero Config is on, and paces a provider that announces no limit and
// rejects nothing not at all: no provisional pace, at any rate.
func TestDefaultsNeverPaceASilentProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{})
		for i := range 5000 {
			now := time.Now()
			for range 20 {
				if w, r, ok := l.Reserve(now, 100, time.Hour); !ok || w != 0 {
					t.Fatalf("request %d: wait %v ok %v, want every request at once", i, w, ok)
				} else if r.Stale() != nil && closed(r.Stale()) {
					t.Fatal("a slot went stale with nothing learned")
				}
			}
			l.Observe(now, llm.RateLimit{}, false)
			time.Sleep(time.Millisecond)
		}
		if h := l.Headroom(time.Now()); h.Known || !math.IsInf(h.Available, 1) || h.Wait != 0 {
			t.Fatalf("headroom of a silent provider: %+v, want unknown and unlimited", h)
		}
	})
}

// The zero Config learns the limits the headers announce, as Learn does,
// but sends everything until they arrive.
func TestDefaultsLearnWithoutAProvisionalPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{})
		now := time.Now()
		var held []throttle.Reservation
		for range 10 {
			w, r, ok := l.Reserve(now, 0, time.Hour)
			if !ok || w != 0 {
				t.Fatalf("before any headers: wait %v ok %v, want at once", w, ok)
			}
			held = append(held, r)
		}
		l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 120, Remaining: 1}}, false)
		var waits []time.Duration
		for range 3 {
			w, _, _ := l.Reserve(now, 0, time.Hour)
			waits = append(waits, w)
		}
		if waits[0] != 0 || waits[1] != 500*time.Millisecond || waits[2] != time.Second {
			t.Fatalf("waits %v, want 0 500ms 1s (one remaining, then 120 per minute learned)", waits)
		}
		if h := l.Headroom(now); !h.Known || h.PerMinute != 120 {
			t.Fatalf("headroom after the headers: %+v, want 120 a minute known", h)
		}
		for _, r := range held {
			if r.Stale() != nil {
				t.Fatal("a slot granted at once, pacing nothing, can go stale")
			}
		}
	})
}

// Under the default pacing a 429 cuts nothing until the 429s say the
// target is over its limit: a healthy target whose first answer is a 429,
// or that answers a few among many, is not slowed. A configured throttle
// cuts on every 429, as before.
func TestDefaultsCutNothingForAFew429s(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{})
		rl := llm.RateLimit{Requests: llm.Allowance{Limit: 4000, Remaining: 3990}}
		l.Observe(time.Now(), rl, true) // the first answer, a 429
		for i := range 500 {
			now := time.Now()
			if w, _, ok := l.Reserve(now, 0, 0); !ok || w != 0 {
				t.Fatalf("request %d after one 429: wait %v ok %v, want at once", i, w, ok)
			}
			l.Observe(now, rl, i%20 == 19) // 5% 429s
			time.Sleep(20 * time.Millisecond)
		}
		if f := l.Factor(); f != 1 {
			t.Fatalf("factor %v after 5%% 429s, want 1", f)
		}
		configured := mustNew(t, throttle.Config{RequestsPerMinute: 4000})
		configured.Observe(time.Now(), rl, true)
		if f := configured.Factor(); f != throttle.DefaultBackoff {
			t.Fatalf("a configured throttle's factor after a 429: %v, want %v", f, throttle.DefaultBackoff)
		}
	})
}

// A provider whose announced limit is not the one it keeps (it announces
// 4000 a minute and admits 60) is paced by the adaptive throttle all the
// same, by what it does.
func TestAdaptiveThrottlePacesAProviderWhoseHeadersAreWrong(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{})
		p := &silent{perMinute: 60, level: 60, at: time.Now()}
		start := time.Now()
		var accepted, rejected int
		for time.Since(start) < 5*time.Minute {
			now := time.Now()
			if _, _, ok := l.Reserve(now, 0, 0); ok {
				ok := p.admit(now)
				if ok {
					accepted++
				} else {
					rejected++
				}
				l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 4000, Remaining: 3900}}, !ok)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if per := float64(rejected) / float64(accepted); per > 1 || float64(accepted) < 0.95*(60+5*60) {
			t.Errorf("%d 429s for %d answers of a capacity of 360: want at most 1 per answer and 0.95 of capacity", rejected, accepted)
		}
	})
}

// silent is a provider that announces no limit and admits perMinute
// requests a minute from a bucket of that size, refilled continuously (as
// Anthropic keeps its limits), answering the rest with 429s.
type silent struct {
	perMinute, level float64
	at               time.Time
}

func (p *silent) admit(now time.Time) bool {
	p.level = math.Min(p.perMinute, p.level+now.Sub(p.at).Minutes()*p.perMinute)
	p.at = now
	if p.level < 1 {
		return false
	}
	p.level--
	return true
}

// A provider that announces no limit and rejects what is over its limit
// gets about AdaptiveK requests per request it accepts (the SRE book's
// adaptive throttle): under one 429 per answer, at its full capacity,
// where a client sending everything gets 49 per answer here.
func TestAdaptiveThrottleHoldsA429ingProviderToKPerAccept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{})
		p := &silent{perMinute: 60, level: 60, at: time.Now()}
		start := time.Now()
		var sent, accepted, rejected, refused int
		// 50 requests asked for every second for 5 minutes, against a
		// provider admitting 60 a minute.
		for time.Since(start) < 5*time.Minute {
			now := time.Now()
			if _, _, ok := l.Reserve(now, 0, 0); !ok {
				refused++
			} else {
				sent++
				ok := p.admit(now)
				if ok {
					accepted++
				} else {
					rejected++
				}
				l.Observe(now, llm.RateLimit{}, !ok)
			}
			time.Sleep(20 * time.Millisecond)
		}
		capacity := 60 + 5*60
		if per := float64(rejected) / float64(accepted); per > throttle.AdaptiveK-1+0.05 {
			t.Errorf("%d 429s for %d answers (%.2f per answer), want about K-1 (K=%v) at most", rejected, accepted, per, throttle.AdaptiveK)
		}
		if share := float64(accepted) / float64(capacity); share < 0.95 {
			t.Errorf("%d answers of a capacity of %d (%.2f), want at least 0.95", accepted, capacity, share)
		}
		if refused == 0 {
			t.Error("nothing refused locally")
		}
		t.Logf("asked %d, sent %d, accepted %d, rejected %d, refused locally %d", sent+refused, sent, accepted, rejected, refused)
	})
}

// A provider that rejects fewer than K-1 requests per request it accepts
// is not throttled (10% of its requests here), and the throttle lets go
// AdaptiveWindow after the last 429.
func TestAdaptiveThrottleSparesAMostlyAcceptingProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{})
		for i := range 20000 {
			now := time.Now()
			if w, _, ok := l.Reserve(now, 0, 0); !ok || w != 0 {
				t.Fatalf("request %d: wait %v ok %v, with 10%% of requests rejected", i, w, ok)
			}
			l.Observe(now, llm.RateLimit{}, i%10 == 9)
			time.Sleep(10 * time.Millisecond)
		}
		// A provider that rejects everything for a while...
		for range 200 {
			now := time.Now()
			if _, _, ok := l.Reserve(now, 0, 0); ok {
				l.Observe(now, llm.RateLimit{}, true)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, _, ok := l.Reserve(time.Now(), 0, 0); ok {
			// The counts were full of accepts: the throttle may still
			// let this one go; it must refuse some within AdaptiveWindow
			// (as the accepts fade).
			refusedSome := false
			for range throttle.AdaptiveWindow / (10 * time.Millisecond) {
				now := time.Now()
				if _, _, ok := l.Reserve(now, 0, 0); !ok {
					refusedSome = true
					break
				}
				l.Observe(now, llm.RateLimit{}, true)
				time.Sleep(10 * time.Millisecond)
			}
			if !refusedSome {
				t.Fatal("a provider rejecting every request is never throttled")
			}
		}
		// ...then nothing for AdaptiveWindow: every request goes again.
		time.Sleep(throttle.AdaptiveWindow)
		for i := range 100 {
			if _, _, ok := l.Reserve(time.Now(), 0, 0); !ok {
				t.Fatalf("request %d refused %v after the last 429", i, throttle.AdaptiveWindow)
			}
		}
	})
}

func TestValidate(t *testing.T) {
	_, err := throttle.New(throttle.Config{RequestsPerMinute: -1, Burst: -1, Backoff: 1.5, MaxWait: -1})
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("got %v", err)
	}
	for _, s := range []string{"RequestsPerMinute", "Burst", "Backoff", "MaxWait"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error lacks %s: %v", s, err)
		}
	}
}

// TestHugeLimitsAreRefused: a limit whose second's worth overflows the
// bucket's integer burst left a limiter that granted nothing (every call
// throttled away from a healthy target); it is a Validate error.
func TestHugeLimitsAreRefused(t *testing.T) {
	for _, s := range []throttle.Config{{RequestsPerMinute: 1e300}, {TokensPerMinute: 1e300}} {
		if _, err := throttle.New(s); !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), "at most") {
			t.Errorf("%+v: got %v; want llm.ErrInvalidConfig", s, err)
		}
	}
	l := mustNew(t, throttle.Config{RequestsPerMinute: throttle.MaxPerMinute, TokensPerMinute: throttle.MaxPerMinute})
	if _, _, ok := l.Reserve(time.Now(), 1000, time.Second); !ok {
		t.Error("a limiter at MaxPerMinute refused the first request")
	}
}

func TestKnownLimitPacesRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{RequestsPerMinute: 60})
		now := time.Now()
		for i := range 5 {
			wait, _, _ := l.Reserve(now, 0, time.Hour)
			if want := time.Duration(i) * time.Second; wait != want {
				t.Fatalf("request %d waits %v, want %v", i, wait, want)
			}
		}
	})
}

func TestCancelGivesTheSlotBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{RequestsPerMinute: 60})
		now := time.Now()
		l.Reserve(now, 0, time.Hour)
		wait, r, _ := l.Reserve(now, 0, time.Hour)
		r.Cancel(now)
		if again, _, _ := l.Reserve(now, 0, time.Hour); again != wait {
			t.Fatalf("after a cancel the next slot is %v away, want %v", again, wait)
		}
	})
}

func TestA429SlowsThenRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{RequestsPerMinute: 60})
		backoff := float64(throttle.DefaultBackoff)
		l.Observe(time.Now(), llm.RateLimit{}, true)
		if f := l.Factor(); f != backoff {
			t.Fatalf("factor after a 429: %v", f)
		}
		// The bucket was drained: the next slot is one slowed interval away.
		wait, _, _ := l.Reserve(time.Now(), 0, time.Hour)
		if want := time.Duration(1e9 / backoff); wait < want-time.Millisecond || wait > want+time.Millisecond {
			t.Fatalf("wait after a 429: %v, want about %v", wait, want)
		}
		time.Sleep(throttle.DefaultRecovery)
		l.Reserve(time.Now(), 0, time.Hour)
		if f := l.Factor(); f != 1 {
			t.Fatalf("factor after Recovery: %v", f)
		}
		for range 5 {
			l.Observe(time.Now(), llm.RateLimit{}, true) // one congestion event: one cut
		}
		if f := l.Factor(); f != backoff {
			t.Fatalf("429s at one instant cut %v, want one cut to %v", f, backoff)
		}
		for range 20 {
			time.Sleep(time.Second)
			l.Observe(time.Now(), llm.RateLimit{}, true)
		}
		if f := l.Factor(); f != throttle.MinFactor {
			t.Fatalf("factor floor: %v", f)
		}
	})
}

func TestHeadersCapWhatTheLimiterHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{RequestsPerMinute: 600, Burst: 50})
		// The limiter thinks 50 slots are free; the provider says 0 remain.
		l.Observe(time.Now(), llm.RateLimit{Requests: llm.Allowance{Limit: 600, Remaining: 0}}, false)
		if wait, _, _ := l.Reserve(time.Now(), 0, time.Hour); wait != 100*time.Millisecond {
			t.Fatalf("wait with nothing remaining: %v, want one interval (100ms)", wait)
		}
	})
}

func TestLearnTakesTheLimitFromHeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{Learn: true})
		now := time.Now()
		// Before any headers: one request a second, not everything at once.
		if w, _, _ := l.Reserve(now, 0, time.Hour); w != 0 {
			t.Fatalf("first request waits %v", w)
		}
		if w, r, _ := l.Reserve(now, 0, time.Hour); w != time.Second {
			t.Fatalf("second request before any headers waits %v, want 1s", w)
		} else {
			r.Cancel(now)
		}
		l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 120, Remaining: 1}}, false)
		var waits []time.Duration
		for range 3 {
			w, _, _ := l.Reserve(now, 0, time.Hour)
			waits = append(waits, w)
		}
		// The provider says one request remains: it goes now, and the
		// next ones at 120 a minute.
		if waits[0] != 0 || waits[1] != 500*time.Millisecond || waits[2] != time.Second {
			t.Fatalf("waits %v, want 0 500ms 1s (one remaining, then 120 per minute learned)", waits)
		}
	})
}

// A provider whose headers announce a token limit and no request limit
// has said what it limits: Learn's provisional pace (one request a
// second until the first headers) ends, and requests are paced by their
// tokens alone.
func TestLearnTokensOnlyEndsTheProvisionalPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, now := mustNew(t, throttle.Config{Learn: true}), time.Now()
		l.Reserve(now, 100, time.Hour) // the provisional pace's one slot now
		w, early, _ := l.Reserve(now, 100, time.Hour)
		if w != time.Second {
			t.Fatalf("before any headers the second request waits %v, want 1s", w)
		}
		l.Observe(now, llm.RateLimit{Tokens: llm.Allowance{Limit: 60000, Remaining: 59000}}, false)
		if !closed(early.Stale()) {
			t.Fatal("a slot spaced at the provisional pace is not stale once the limits are known")
		}
		for i := range 50 { // 5,000 tokens of the 59,000 remaining
			if w, _, _ := l.Reserve(now, 100, time.Hour); w != 0 {
				t.Fatalf("request %d waits %v with tokens to spare and no request limit announced", i, w)
			}
		}
		// The token limit paces them: 1,000 tokens a second.
		l.Observe(now, llm.RateLimit{Tokens: llm.Allowance{Limit: 60000, Remaining: 0}}, false)
		if w, _, _ := l.Reserve(now, 100, time.Hour); w != 100*time.Millisecond {
			t.Fatalf("with no tokens remaining a request of 100 waits %v, want 100ms", w)
		}
		// A request limit announced later is learned as before.
		l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 60, Remaining: 0},
			Tokens: llm.Allowance{Limit: 60000, Remaining: 60000}}, false)
		if w, _, _ := l.Reserve(now, 100, time.Hour); w != time.Second {
			t.Fatalf("with no requests remaining of 60 a minute the next waits %v, want 1s", w)
		}
	})
}

// The same with the token limit configured: headers that announce tokens
// alone end the provisional request pace though they teach nothing new.
func TestLearnWithTokensConfiguredEndsTheProvisionalPace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, now := mustNew(t, throttle.Config{Learn: true, TokensPerMinute: 60000}), time.Now()
		l.Observe(now, llm.RateLimit{Tokens: llm.Allowance{Limit: 60000, Remaining: 60000}}, false)
		for i := range 5 {
			if w, _, _ := l.Reserve(now, 100, time.Hour); w != 0 {
				t.Fatalf("request %d waits %v with tokens to spare and no request limit announced", i, w)
			}
		}
	})
}

// Headers that name no token limit (a remaining count alone), or a
// request allowance without its limit, do not end the provisional pace:
// nothing would pace requests after it.
func TestLearnKeepsTheProvisionalPaceWithoutATokenLimit(t *testing.T) {
	for name, rl := range map[string]llm.RateLimit{
		"tokens remaining, no limit": {Tokens: llm.Allowance{Remaining: 5000}},
		"requests remaining, no limit, beside a token limit": {Requests: llm.Allowance{Remaining: 5},
			Tokens: llm.Allowance{Limit: 60000, Remaining: 60000}},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, now := mustNew(t, throttle.Config{Learn: true}), time.Now()
				l.Observe(now, rl, false)
				l.Reserve(now, 100, time.Hour)
				if w, _, _ := l.Reserve(now, 100, time.Hour); w < time.Second {
					t.Fatalf("the second request waits %v: the provisional pace (1s) ended with no limit to pace by", w)
				}
			})
		})
	}
}

// A slot canceled in an epoch without a request bucket is forgotten: a
// later rebuild does not count its tokens as owed to its holder.
func TestCanceledTokenSlotIsNotOwed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{Learn: true})
		now := time.Now()
		l.Observe(now, llm.RateLimit{Tokens: llm.Allowance{Limit: 60000, Remaining: 0}}, false) // 1,000 a second, none left
		w, r, _ := l.Reserve(now, 1000, time.Hour)
		if w != time.Second {
			t.Fatalf("1,000 tokens with none left wait %v, want 1s", w)
		}
		r.Cancel(now)
		// A request limit learned rebuilds the token bucket from what it
		// holds (nothing) and what pending slots took.
		l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 60, Remaining: 60}}, false)
		if w, _, _ := l.Reserve(now, 1000, time.Hour); w != time.Second {
			t.Fatalf("after the rebuild 1,000 tokens wait %v, want 1s: the canceled slot's tokens came back twice", w)
		}
	})
}

// A slot further away than the caller's limit is not taken: the limiter
// is left exactly as it was, however refusals interleave.
func TestRefusedSlotsDoNotLeak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{RequestsPerMinute: 60})
		now := time.Now()
		l.Reserve(now, 0, time.Hour) // the burst
		for range 10 {
			if _, _, ok := l.Reserve(now, 0, 500*time.Millisecond); ok {
				t.Fatal("a slot 1s away was granted under a 500ms limit")
			}
		}
		if w, _, _ := l.Reserve(now, 0, time.Hour); w != time.Second {
			t.Fatalf("after ten refusals the next slot is %v away, want 1s", w)
		}
	})
}

func TestTokensPerMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{TokensPerMinute: 6000}) // 100 per second
		now := time.Now()
		l.Reserve(now, 100, time.Hour)
		if wait, _, _ := l.Reserve(now, 300, time.Hour); wait != 3*time.Second {
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
		l := mustNew(t, throttle.Config{RequestsPerMinute: 6000, Learn: true})
		var wg sync.WaitGroup
		for i := range 100 {
			wg.Go(func() {
				for range 10 {
					w, r, _ := l.Reserve(time.Now(), 10, time.Hour)
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

// closed reports whether c is closed (a nil channel never is).
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Slots granted at the provisional pace go stale when the limit is
// learned; taken again, they follow what the headers said. A repeated
// announcement of the same limit changes nothing.
func TestLearningMakesEarlierSlotsStale(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{Learn: true})
		now := time.Now()
		var old []throttle.Reservation
		for i := range 4 {
			w, r, _ := l.Reserve(now, 0, time.Hour)
			if w != time.Duration(i)*time.Second {
				t.Fatalf("provisional slot %d is %v away, want %ds", i, w, i)
			}
			if r.Stale() == nil || closed(r.Stale()) {
				t.Fatalf("slot %d: Stale is %v before anything was learned", i, r.Stale())
			}
			old = append(old, r)
		}
		l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 120, Remaining: 2}}, false)
		for i, r := range old {
			if !closed(r.Stale()) {
				t.Fatalf("slot %d is not stale after the limit was learned", i)
			}
		}
		// The three holders still waiting take their slots again: two
		// remain now, then 120 a minute. Cancelling a stale slot gives
		// nothing back to the rebuilt bucket.
		var waits []time.Duration
		var fresh []throttle.Reservation
		for _, r := range old[1:] {
			r.Cancel(now)
			w, r, _ := l.Reserve(now, 0, time.Hour)
			waits = append(waits, w)
			fresh = append(fresh, r)
		}
		if waits[0] != 0 || waits[1] != 0 || waits[2] != 500*time.Millisecond {
			t.Fatalf("slots taken again are %v away, want 0 0 500ms (two remaining, then 120 a minute)", waits)
		}
		// The same limit again is no change: nothing goes stale.
		l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 120, Remaining: 0}}, false)
		if closed(fresh[2].Stale()) {
			t.Fatal("a slot went stale although the limit did not change")
		}
		// A new limit does, and the rebuilt bucket is the new limit's
		// drained to what remains: three go at once, then one a second.
		l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 60, Remaining: 3}}, false)
		if !closed(fresh[2].Stale()) {
			t.Fatal("a slot is not stale after the limit changed")
		}
		fresh[2].Cancel(now)
		waits = waits[:0]
		for range 4 {
			w, _, _ := l.Reserve(now, 0, time.Hour)
			waits = append(waits, w)
		}
		if !slices.Equal(waits, []time.Duration{0, 0, 0, time.Second}) {
			t.Fatalf("after the limit changed to 60 a minute with 3 remaining the slots are %v away, want 0 0 0 1s", waits)
		}
	})
}

// A limiter that learns nothing hands out reservations that never go
// stale: their Stale channel is nil.
func TestStaleIsNilWhenNothingIsLearned(t *testing.T) {
	for _, s := range []throttle.Config{
		{RequestsPerMinute: 60},
		{RequestsPerMinute: 60, TokensPerMinute: 6000, Learn: true},
	} {
		l := mustNew(t, s)
		_, r, _ := l.Reserve(time.Now(), 10, time.Hour)
		if r.Stale() != nil {
			t.Errorf("%+v: Stale is not nil", s)
		}
	}
	if (throttle.Reservation{}).Stale() != nil {
		t.Error("the zero Reservation's Stale is not nil")
	}
}

// A bucket rebuilt without new headers (here the configured token limit,
// when the request limit is learned) leaves out what the stale slots took
// from it, so that their holders, taking them again, are not counted
// twice.
func TestRebuildLeavesOutWhatStaleSlotsTook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{TokensPerMinute: 6000, Learn: true}) // 100 tokens a second, burst 100
		now := time.Now()
		var held []throttle.Reservation
		for range 3 {
			_, r, _ := l.Reserve(now, 50, time.Hour) // provisional requests at 0, 1s, 2s; tokens 100, 50, 0, -50
			held = append(held, r)
		}
		l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 6000, Remaining: 6000}}, false)
		// The first slot was reached (its request went); the other two
		// take theirs again: 50 tokens are left, then 100 a second.
		var waits []time.Duration
		for _, r := range held[1:] {
			if !closed(r.Stale()) {
				t.Fatal("a slot is not stale after the request limit was learned")
			}
			r.Cancel(now)
			w, _, _ := l.Reserve(now, 50, time.Hour)
			waits = append(waits, w)
		}
		if waits[0] != 0 || waits[1] != 500*time.Millisecond {
			t.Fatalf("slots taken again are %v away, want 0 and 500ms (the tokens they took were given back)", waits)
		}
	})
}

// reserveN takes n slots at once and returns how far away each is.
func reserveN(l *throttle.Limiter, now time.Time, n, tokens int) []time.Duration {
	waits := make([]time.Duration, n)
	for i := range waits {
		waits[i], _, _ = l.Reserve(now, tokens, time.Hour)
	}
	return waits
}

// A learned request limit is kept as the provider keeps it: a bucket of
// the per-minute limit, never holding more than the headers say remain,
// refilled at the limit.
func TestLearnAdoptsTheProvidersBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{Learn: true})
		now := time.Now()
		l.Reserve(now, 0, time.Hour) // the first request, before any headers
		l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 50, Remaining: 49}}, false)
		waits := reserveN(l, now, 51, 0)
		for i, w := range waits[:49] {
			if w != 0 {
				t.Fatalf("request %d of the 49 remaining waits %v, want 0", i, w)
			}
		}
		if waits[49] != 1200*time.Millisecond || waits[50] != 2400*time.Millisecond {
			t.Fatalf("after the bucket: waits %v, want 1.2s 2.4s (50 a minute)", waits[49:])
		}
		// Refilled for two minutes, the bucket holds 50, no more.
		time.Sleep(2 * time.Minute)
		waits = reserveN(l, time.Now(), 51, 0)
		if waits[49] != 0 || waits[50] != 1200*time.Millisecond {
			t.Fatalf("a refilled bucket: the 50th and 51st wait %v, want 0 and 1.2s", waits[49:])
		}
	})
}

// A configured Burst wins over the learned bucket for requests; a learned
// token limit's bucket is the announced limit whatever Burst is (Burst
// counts requests).
func TestConfiguredBurstWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := mustNew(t, throttle.Config{Learn: true, Burst: 5})
		now := time.Now()
		l.Observe(now, llm.RateLimit{
			Requests: llm.Allowance{Limit: 60, Remaining: 60},
			Tokens:   llm.Allowance{Limit: 60000, Remaining: 30000},
		}, false)
		if waits := reserveN(l, now, 6, 0); !slices.Equal(waits, []time.Duration{0, 0, 0, 0, 0, time.Second}) {
			t.Fatalf("with Burst 5: waits %v, want five at once, then 1s", waits)
		}
		time.Sleep(5 * time.Second)
		now = time.Now()
		// The 30000 tokens remaining, and the 5000 refilled since (60000
		// a minute), go in one request; 1000 more take a second.
		if w, _, _ := l.Reserve(now, 35000, time.Hour); w != 0 {
			t.Fatalf("35000 tokens of the 35000 the bucket holds wait %v, want 0", w)
		}
		if w, _, _ := l.Reserve(now, 1000, time.Hour); w != time.Second {
			t.Fatalf("1000 tokens after the bucket wait %v, want 1s", w)
		}
	})
}

// near reports whether a and b agree to within a millionth.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-6*math.Max(1, math.Abs(b)) }

// checkHeadroom fails unless h is want (floats to within a millionth)
// and, when the limiter is given, its next slot is h.Wait away.
func checkHeadroom(t *testing.T, when string, l *throttle.Limiter, now time.Time, want throttle.Headroom) {
	t.Helper()
	h := l.Headroom(now)
	if h.Known != want.Known || !near(h.PerMinute, want.PerMinute) || h.Wait != want.Wait ||
		!(near(h.Available, want.Available) || math.IsInf(want.Available, 1) && math.IsInf(h.Available, 1)) {
		t.Fatalf("%s: headroom %+v, want %+v", when, h, want)
	}
	if l != nil {
		if w, _, _ := l.Reserve(now, 1, time.Hour); w != h.Wait {
			t.Fatalf("%s: Headroom said the next slot is %v away; Reserve gave %v", when, h.Wait, w)
		}
	}
}

func TestHeadroom(t *testing.T) {
	inf := math.Inf(1)
	t.Run("learned", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustNew(t, throttle.Config{Learn: true})
			now := time.Now()
			for range 3 {
				l.Headroom(now) // looking takes nothing
			}
			// Provisional: one a second, not a known limit. (checkHeadroom
			// takes the slot it reports.)
			checkHeadroom(t, "before any headers", l, now, throttle.Headroom{Available: 1})
			checkHeadroom(t, "provisional slot taken", l, now, throttle.Headroom{Available: 0, Wait: time.Second})
			l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 50, Remaining: 49}}, false)
			checkHeadroom(t, "learned 50 a minute, 49 remaining", l, now, throttle.Headroom{Known: true, PerMinute: 50, Available: 49})
			reserveN(l, now, 48, 0)
			checkHeadroom(t, "the bucket used", l, now, throttle.Headroom{Known: true, PerMinute: 50, Available: 0, Wait: 1200 * time.Millisecond})
			reserveN(l, now, 1, 0)
			// Two slots queued: the next is three intervals away.
			checkHeadroom(t, "two slots queued", l, now, throttle.Headroom{Known: true, PerMinute: 50, Available: -2, Wait: 3600 * time.Millisecond})
		})
	})
	t.Run("after a 429", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustNew(t, throttle.Config{RequestsPerMinute: 60, Burst: 3})
			now := time.Now()
			if h := l.Headroom(now); !h.Known || !near(h.PerMinute, 60) || !near(h.Available, 3) || h.Wait != 0 {
				t.Fatalf("a known limit: %+v", h)
			}
			l.Observe(now, llm.RateLimit{}, true)
			// 0.7 of the limit, the bucket drained: the next slot is one
			// slowed interval (1/0.7 s, rounded up to the millisecond) away.
			checkHeadroom(t, "after a 429", l, now, throttle.Headroom{Known: true, PerMinute: 42, Available: 0, Wait: 1429 * time.Millisecond})
			time.Sleep(throttle.DefaultRecovery)
			if h := l.Headroom(time.Now()); !near(h.PerMinute, 60) || !near(h.Available, 3) {
				t.Fatalf("after Recovery: %+v, want 60 a minute and a full bucket of 3", h)
			}
		})
	})
	t.Run("tokens only", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			l := mustNew(t, throttle.Config{TokensPerMinute: 6000}) // 100 a second
			now := time.Now()
			l.Reserve(now, 300, time.Hour) // 100 in the bucket: 200 owed
			checkHeadroom(t, "tokens owed", l, now, throttle.Headroom{Available: inf, Wait: 2010 * time.Millisecond})
		})
	})
	t.Run("off", func(t *testing.T) {
		var l *throttle.Limiter // New's answer for the zero Config
		checkHeadroom(t, "throttling off", l, time.Now(), throttle.Headroom{Available: inf})
	})
}

// BenchmarkReserve takes one slot a call, a second apart, so that every
// slot is free at once and a Learn limiter's pending slots are swept as
// they are reached (the map stays small, as in a paced run).
func BenchmarkReserve(b *testing.B) {
	for _, bc := range []struct {
		name string
		s    throttle.Config
	}{
		{"learn", throttle.Config{Learn: true}},
		{"configured", throttle.Config{RequestsPerMinute: 60}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := throttle.New(bc.s)
			if err != nil || l == nil {
				b.Fatal(l, err)
			}
			now := time.Now()
			b.ReportAllocs()
			for b.Loop() {
				now = now.Add(time.Second)
				if _, _, ok := l.Reserve(now, 100, time.Second); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

// TestPacesOnlyOnceThereIsALimit: Paces is false for the zero Config's
// limiter until it learns a limit, and true once it has one, so that a
// caller skipping Reserve while it is false skips nothing.
func TestPacesOnlyOnceThereIsALimit(t *testing.T) {
	l, err := throttle.New(throttle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if l.Paces() {
		t.Fatal("a limiter that knows no limit paces")
	}
	l.Observe(now, llm.RateLimit{Requests: llm.Allowance{Limit: 60, Remaining: 0}}, false)
	if !l.Paces() {
		t.Fatal("a limiter that learned a limit of 60 a minute does not pace")
	}
	if configured, _ := throttle.New(throttle.Config{RequestsPerMinute: 60}); !configured.Paces() {
		t.Fatal("a configured limit does not pace")
	}
}

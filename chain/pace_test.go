package chain_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/throttle"
)

// limited is a provider that admits perMinute requests a minute from a
// token bucket of that size, refilled continuously (as Anthropic keeps
// its limits): an admitted request is answered after a second, a rejected
// one gets a 429 with Retry-After after 500ms. With announce it sends the
// bucket's limit and remaining, as rate-limit headers; without, nothing.
type limited struct {
	perMinute float64
	announce  bool

	mu                 sync.Mutex
	level              float64
	at                 time.Time
	admitted, rejected int
}

func newLimited(perMinute float64, announce bool) *limited {
	return &limited{perMinute: perMinute, announce: announce, level: perMinute, at: time.Now()}
}

func (p *limited) Name() string { return "limited" }

func (p *limited) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	p.mu.Lock()
	now := time.Now()
	p.level = math.Min(p.perMinute, p.level+now.Sub(p.at).Minutes()*p.perMinute)
	p.at = now
	ok := p.level >= 1
	if ok {
		p.level--
		p.admitted++
	} else {
		p.rejected++
	}
	var rl llm.RateLimit
	if p.announce {
		rl.Requests = llm.Allowance{Limit: int32(p.perMinute), Remaining: int32(p.level)}
	}
	retryAfter := time.Duration(math.Ceil((1-p.level)/p.perMinute*60)) * time.Second
	p.mu.Unlock()
	delay := time.Second
	if !ok {
		delay = 500 * time.Millisecond
	}
	select {
	case <-time.After(delay):
	case <-ctx.Done():
		return nil, &llm.Error{Provider: p.Name(), Kind: llm.KindCanceled, Err: ctx.Err()}
	}
	if !ok {
		return nil, &llm.Error{Provider: p.Name(), Status: 429, Kind: llm.KindRateLimited, RetryAfter: retryAfter, RateLimit: rl}
	}
	return &llm.Response{Text: "ok", Model: req.Model, RateLimit: rl}, nil
}

// hammer runs clients callers of c, each calling again as soon as its call
// ends (a second later after a call refused at once), for d; it returns
// the calls made and those that failed. A call may fail only as the
// throttle refused it (throttle.ErrThrottled, at once) or with the
// provider's 429.
func hammer(t *testing.T, c *chain.Chain, clients int, d time.Duration) (calls, failed int) {
	end := time.Now().Add(d)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(d+2*time.Second, cancel)
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(end) {
				began := time.Now()
				_, err := c.Call(ctx, req)
				if ctx.Err() != nil {
					return // cut short by the end of the run
				}
				if err != nil && !errors.Is(err, throttle.ErrThrottled) && llm.KindOf(err) != llm.KindRateLimited {
					t.Errorf("a call failed with %v, want a local refusal or a 429", err)
				}
				mu.Lock()
				calls++
				if err != nil {
					failed++
				}
				mu.Unlock()
				if err != nil && time.Since(began) == 0 {
					time.Sleep(time.Second)
				}
			}
		})
	}
	wg.Wait()
	return calls, failed
}

// paced runs 100 clients for 3 minutes against a target limited to 50
// requests a minute, with the chain's defaults, and returns its answers
// and 429s, and the provider's capacity over the run (its bucket of 50
// plus its refill).
func paced(t *testing.T, announce bool) (admitted, rejected int, capacity float64) {
	const clients, perMinute, d = 100, 50, 3 * time.Minute
	p := newLimited(perMinute, announce)
	c, err := chain.New("pace").Primary(chain.Target{Name: "primary", Provider: p, Model: "m"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	calls, failed := hammer(t, c, clients, d)
	t.Logf("announce %v: %d calls, %d failed; provider admitted %d, rejected %d", announce, calls, failed, p.admitted, p.rejected)
	return p.admitted, p.rejected, perMinute + perMinute*d.Minutes()
}

// TestDefaultsPaceATargetThatAnnouncesItsLimit: with the defaults, a
// target whose headers announce its limit is paced to it once they do:
// its only 429s are the first instant's requests beyond its bucket (a
// client that knows nothing sends them), at most 1 per answer, with
// goodput at least 0.95 of its capacity. Unpaced, every call sent while a
// 429 was on its way got a 429 too: hundreds per answer.
func TestDefaultsPaceATargetThatAnnouncesItsLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		admitted, rejected, capacity := paced(t, true)
		if share := float64(admitted) / capacity; share < 0.95 {
			t.Errorf("goodput %.3f of capacity, want at least 0.95", share)
		}
		if opening := 100 - 50; rejected > opening || rejected > admitted {
			t.Errorf("%d 429s for %d answers, want at most the first instant's %d and at most 1 per answer", rejected, admitted, opening)
		}
	})
}

// TestDefaultsPaceATargetThatOnlyRejects: with the defaults, a target
// that announces no limit but answers 429s is held by the adaptive
// throttle to about AdaptiveK requests per request it accepts: at most 1
// 429 per answer (0.64 measured), with goodput at least 0.95. Unpaced,
// hundreds per answer.
func TestDefaultsPaceATargetThatOnlyRejects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		admitted, rejected, capacity := paced(t, false)
		if share := float64(admitted) / capacity; share < 0.95 {
			t.Errorf("goodput %.3f of capacity, want at least 0.95", share)
		}
		if per := float64(rejected) / float64(admitted); per > 1 {
			t.Errorf("%d 429s for %d answers (%.2f per answer), want at most 1", rejected, admitted, per)
		}
	})
}

// TestDefaultsMoveAPacedCallToTheFallback: once the defaults have learned
// the primary's limit, a call whose slot is further away than MaxWait goes
// to the next target at once, without a request to the primary: every
// call is answered, and the primary gets no more than its limit.
func TestDefaultsMoveAPacedCallToTheFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newLimited(50, true)
		f := &timed{name: "f", delay: time.Second}
		c, err := chain.New("pace").Primary(chain.Target{Name: "primary", Provider: p, Model: "m"}).
			OrProvider(chain.Target{Name: "fallback", Provider: f, Model: "m"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		calls, failed := hammer(t, c, 100, 2*time.Minute)
		if failed != 0 {
			t.Errorf("%d of %d calls failed, want every one answered (by the fallback when the primary has no slot)", failed, calls)
		}
		if p.rejected > 50 || p.admitted < 140 {
			t.Errorf("primary admitted %d and rejected %d, want about its capacity (150) and at most the first instant's 50 429s", p.admitted, p.rejected)
		}
		t.Logf("%d calls; primary admitted %d, rejected %d; fallback %d requests", calls, p.admitted, p.rejected, f.count())
	})
}

// TestDefaultsLeaveASilentTargetAlone: a target that announces no limit
// and rejects nothing is not paced by the defaults: 200 calls at one
// instant are all sent at once and all answered a second later, with no
// wait and no skip.
func TestDefaultsLeaveASilentTargetAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &timed{name: "p", delay: time.Second}
		c, err := chain.New("pace").Primary(chain.Target{Name: "primary", Provider: p, Model: "m"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
		for round := range 3 {
			start := time.Now()
			var wg sync.WaitGroup
			for range 200 {
				wg.Go(func() {
					res, err := c.Call(context.Background(), req)
					if err != nil || len(res.Attempts) != 1 || res.Attempts[0].Wait != 0 {
						t.Errorf("round %d: %v, attempts %+v; want one attempt sent at once", round, err, res.Attempts)
					}
					if took := time.Since(start); took != time.Second {
						t.Errorf("round %d: the call took %v, want the provider's 1s", round, took)
					}
				})
			}
			wg.Wait()
		}
		if n := p.count(); n != 600 {
			t.Fatalf("the provider got %d requests, want 600", n)
		}
	})
}

// TestThrottleDisabledIsValidatedAtBuild: Disabled beside a limit is a
// contradiction Build reports, naming the field.
func TestThrottleDisabledIsValidatedAtBuild(t *testing.T) {
	_, err := chain.New("pace").Primary(chain.Target{Name: "primary", Provider: &timed{name: "p"}, Model: "m",
		Throttle: throttle.Config{Disabled: true, RequestsPerMinute: 50}}).Build()
	if !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), "Disabled") {
		t.Fatalf("Build: %v, want an invalid configuration naming Disabled", err)
	}
	c, err := chain.New("pace").Primary(chain.Target{Name: "primary", Provider: &timed{name: "p"}, Model: "m",
		Throttle: throttle.Config{Disabled: true}}).Build()
	if err != nil {
		t.Fatalf("Build with throttling Disabled: %v", err)
	}
	c.Close()
}

package backstop_test

// One invalid-configuration sentinel across the module: every package's
// exported sentinel is the same value, so any of them matches a
// configuration error from any package, while each message still says
// which package found the problem.

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/throttle"
)

// idle is a provider that is never called: the chains here fail to build.
type idle struct{}

func (idle) Name() string { return "idle" }
func (idle) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return nil, errors.New("idle: not called")
}

// Every constructor's and Validate's configuration error wraps the one
// sentinel, llm.ErrInvalidConfig, and says which package found it.
func TestConfigErrorsWrapTheOneSentinel(t *testing.T) {
	errOf := func(_ any, err error) error { return err }
	for _, c := range []struct {
		name, prefix string
		err          error
	}{
		{"breaker.New", "breaker: invalid configuration: FailureRatio is 1.5", errOf(breaker.New("t", breaker.Config{FailureRatio: 1.5}))},
		{"breaker.NewShared", "breaker: invalid configuration: shared state: store is nil", errOf(breaker.NewShared(nil, breaker.SharedConfig{}))},
		{"throttle.New", "throttle: invalid configuration: Burst is -1", errOf(throttle.New(throttle.Config{Burst: -1}))},
		{"budget.NewRatio", "budget: invalid configuration: ratio budget: Ratio is 1.5", errOf(budget.NewRatio(budget.RatioConfig{Ratio: 1.5}))},
		{"budget.NewTokenBucket", "budget: invalid configuration: ", errOf(budget.NewTokenBucket(budget.TokenBucketConfig{Capacity: -1}))},
		{"budget.NewShared", "budget: invalid configuration: shared budget: store is nil", errOf(budget.NewShared(nil, budget.SharedConfig{}))},
		{"cache.NewMemory", "cache: invalid configuration: memory store: MaxEntries is -1", errOf(cache.NewMemory(cache.MemoryConfig{MaxEntries: -1}))},
		{"redisstore.NewCache", "cache: invalid configuration: redis store: ", errOf(redisstore.NewCache(nil, redisstore.CacheConfig{}))},
		{"redisstore.New", "redisstore: invalid configuration: ", errOf(redisstore.New(nil))},
		{"hedge.Config.Validate", "hedge: invalid configuration: ", hedge.Config{Delay: -1}.Validate()},
		{"retry.Policy.Validate", "retry: invalid policy: MaxAttempts is -2", retry.Policy{MaxAttempts: -2}.Validate()},
		{"chain.Build", `chain "bad": target "t": `, errOf(chain.New("bad").Primary(chain.Target{
			Name: "t", Provider: idle{}, Model: "m",
			Breaker: breaker.Config{FailureRatio: 2},
		}).Build())},
	} {
		if c.err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.HasPrefix(c.err.Error(), c.prefix) {
			t.Errorf("%s: error %q does not begin %q", c.name, c.err, c.prefix)
		}
		if !errors.Is(c.err, llm.ErrInvalidConfig) {
			t.Errorf("%s: error %q does not wrap llm.ErrInvalidConfig", c.name, c.err)
		}
	}
}

// A chain's configuration error that comes from a breaker's settings is
// reachable through the one sentinel, and is not mistaken for a call-time
// error.
func TestChainBuildErrorFromABreakerWrapsTheSentinel(t *testing.T) {
	_, err := chain.New("bad").Primary(chain.Target{
		Name: "t", Provider: idle{}, Model: "m",
		Breaker: breaker.Config{FailureRatio: 2},
	}).Build()
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("got %v", err)
	}
	if errors.Is(err, chain.ErrExhausted) || errors.Is(err, breaker.ErrOpen) || llm.KindOf(err) != llm.KindUnknown {
		t.Fatalf("a configuration error matches a call-time error: %v", err)
	}
}

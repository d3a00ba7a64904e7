package chain_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/redis/go-redis/v9"
)

// Shape of the load test, issue 24's: 2 replicas, 50 concurrent callers,
// 2,000 calls, each answered after loadLatency, so that the run lasts
// about 0.8s: several of the pollers' reads, not only the first.
const (
	loadReplicas = 2
	loadCallers  = 50
	loadCalls    = 2000
	loadLatency  = 20 * time.Millisecond
)

// slow is a healthy provider that answers after loadLatency: the
// workload of the load test, in real time (its Redis is a real process).
type slow struct{ flaky }

func (s *slow) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	time.Sleep(loadLatency)
	return s.flaky.Complete(ctx, req)
}

// TestSharedLoadDecidesOnSharedState is the load test of issue 24: two
// replicas of a shared chain with the default SharedConfig, on a
// redis-server of the test's own on loopback (a real one: a test that
// fails under CI=true without one, and is skipped elsewhere saying how to
// install it), 50 callers making 2,000 calls of a provider that answers
// in 20ms. With a healthy Redis no call may decide on local state, and the
// Redis commands must not grow with the calls. It runs in real time (a
// real Redis process) and asserts counts, never durations.
func TestSharedLoadDecidesOnSharedState(t *testing.T) {
	srv := redistest.StartServer(t)
	prefix := "load" // the server is the test's own
	var local atomic.Int64
	obs := &observe.Funcs{OnSharedLocal: func() { local.Add(1) }}
	var sent redistest.Commands
	var replicas []*chain.Chain
	for range loadReplicas {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		c.AddHook(&sent)
		t.Cleanup(func() { _ = c.Close() })
		r, err := chain.New("load").Shared(sharedStore(t, c), chain.SharedConfig{Prefix: prefix}).Observe(obs).
			Primary(chain.Target{Name: "primary", Provider: &slow{flaky{name: "anthropic"}}, Model: "claude"}).
			OrProvider(chain.Target{Name: "fallback", Provider: &flaky{name: "openai"}, Model: "gpt"}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Close)
		replicas = append(replicas, r)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Int64
	for range loadCallers {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > loadCalls {
					return
				}
				res, err := replicas[n%loadReplicas].Call(context.Background(), ask)
				if err != nil || res.Served.Target != "primary" {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	for _, r := range replicas {
		if err := r.Flush(context.Background()); err != nil {
			t.Errorf("Flush: %v", err)
		}
	}
	t.Logf("%d calls, %d decided on local state, %d Redis commands (%.3f a call)",
		loadCalls, local.Load(), sent.N.Load(), float64(sent.N.Load())/loadCalls)
	if n := failed.Load(); n != 0 {
		t.Errorf("%d calls were not served by the primary", n)
	}
	if n := local.Load(); n != 0 {
		t.Errorf("%d of %d calls decided on local state with a healthy Redis; want 0", n, loadCalls)
	}
	if per := float64(sent.N.Load()) / loadCalls; per > 0.1 {
		t.Errorf("%.3f Redis commands a call; want at most 0.1: no round trip on every call", per)
	}
}

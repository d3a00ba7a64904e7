package budget

// Integration tests and benchmarks of Shared against a real Redis server,
// found by internal/redistest: skipped when none answers, failed under
// CI=true.

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/redistest"
)

// stormReplica is one replica's share of a storm against a failing primary:
// calls first attempts, each followed by up to maxRetries retries, each
// asked of b first. It returns the retries b granted.
func stormReplica(ctx context.Context, b Budget, calls, maxRetries int) (retries int) {
	for range calls {
		b.Record(ctx, Outcome{}) // the first attempt failed
		for range maxRetries {
			if b.Withdraw(ctx) != nil {
				break // the chain moves on to the next target
			}
			retries++
			b.Record(ctx, Outcome{Retry: true}) // and the retry failed too
		}
	}
	return retries
}

// replicaStorm runs one stormReplica per budget, all at once, and returns the
// retries granted in all.
func replicaStorm(budgets []Budget, calls, maxRetries int) int {
	ctx := context.Background()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		start = make(chan struct{})
	)
	for _, b := range budgets {
		wg.Go(func() {
			<-start
			n := stormReplica(ctx, b, calls, maxRetries)
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return total
}

// TestShared40ReplicasShareOneBudget is issue 8's headline: 40 replicas of
// a service, each with its own Redis client, storm one failing primary
// within one window (a minute; the default 10%, floor of 10). On one Shared
// key they send no more retries than one budget allows, max(10, 10% of all
// first attempts); with a local Ratio each, every replica spends a budget of
// its own. Sharing takes away the 40 floors: while the per-replica traffic
// is low (fewer than 100 calls per window, when the floor is above 10% of
// it) that is 20 to 40 times fewer retries; when it is high, 10% of each
// replica's traffic adds up to 10% of all of it either way.
func TestShared40ReplicasShareOneBudget(t *testing.T) {
	const replicas = 40
	cfg := RatioConfig{Window: time.Minute} // 10%, a floor of 10; the run fits in one window
	prefix := redistest.Prefix(t)
	for _, tc := range []struct {
		name       string
		calls      int // per replica
		maxRetries int // per call
		minFactor  float64
	}{
		// 80 first attempts: one budget is its floor, 10; 40 floors are 400.
		{"idle: 2 calls per replica, 5 retries each", 2, 5, 40},
		// 200 first attempts: one budget allows 20; 40 floors are 400.
		{"quiet: 5 calls per replica, 2 retries each", 5, 2, 20},
		// 8000 first attempts: one budget allows 800; so do 40 budgets of 20.
		{"busy: 200 calls per replica, 2 retries each", 200, 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := prefix + fmt.Sprintf("budget:%d", tc.calls)
			firsts := replicas * tc.calls
			oneBudget := max(DefaultMinRetries, firsts/10)
			perReplica := min(tc.calls*tc.maxRetries, max(DefaultMinRetries, tc.calls/10))

			var fellBack sync.Once
			onError := func(err error) {
				fellBack.Do(func() { t.Errorf("a replica fell back to its local budget: %v", err) })
			}
			shared := make([]*Shared, replicas)
			budgets := make([]Budget, replicas)
			for i := range shared {
				// Each replica its own client and pool, as in its own
				// process. The Timeout is generous so that a loaded test
				// machine measures the shared budget, not the fallback.
				shared[i] = newTestShared(t, redistest.Client(t), key,
					SharedOptions{Ratio: cfg, Timeout: 5 * time.Second, OnError: onError})
				budgets[i] = shared[i]
			}
			sharedRetries := replicaStorm(budgets, tc.calls, tc.maxRetries)

			for i := range budgets {
				budgets[i] = must(NewRatio(cfg))
			}
			localRetries := replicaStorm(budgets, tc.calls, tc.maxRetries)

			for _, s := range shared {
				if err := s.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			f, r := counts(t, shared[0])
			t.Logf("%d replicas x %d calls = %d first attempts, up to %d retries each: "+
				"shared budget granted %d retries (one budget allows %d; load on the primary %.2fx), "+
				"40 local budgets granted %d (%d each; load %.2fx): %.1fx as many",
				replicas, tc.calls, firsts, tc.maxRetries,
				sharedRetries, oneBudget, float64(firsts+sharedRetries)/float64(firsts),
				localRetries, perReplica, float64(firsts+localRetries)/float64(firsts),
				float64(localRetries)/float64(sharedRetries))

			if f != int64(firsts) || r != int64(sharedRetries) {
				t.Errorf("Redis counts %d first attempts and %d retries; want %d and %d", f, r, firsts, sharedRetries)
			}
			if sharedRetries > oneBudget || sharedRetries < DefaultMinRetries {
				t.Errorf("the shared budget granted %d retries; want from the floor, %d, to one budget's allowance, %d",
					sharedRetries, DefaultMinRetries, oneBudget)
			}
			if localRetries != replicas*perReplica {
				t.Errorf("the local budgets granted %d retries; want %d x %d", localRetries, replicas, perReplica)
			}
			if got := float64(localRetries) / float64(sharedRetries); got < tc.minFactor {
				t.Errorf("local budgets granted %.1fx the shared budget's retries; want at least %vx", got, tc.minFactor)
			}
		})
	}
}

// must returns b, panicking on err.
func must[B any](b B, err error) B {
	if err != nil {
		panic(err)
	}
	return b
}

// benchShared returns a Shared budget on a fresh key of the real server
// whose window does not roll during a benchmark; with plenty set, every
// Withdraw is granted, otherwise every Withdraw is refused. Its Timeout is
// a second, so that a loaded machine measures Redis, not the fallback.
func benchShared(b *testing.B, plenty bool) *Shared {
	b.Helper()
	c := RatioConfig{Window: 24 * time.Hour, MinRetries: -1}
	if plenty {
		c.Ratio, c.MinRetries = 1, math.MaxInt32
	}
	s, err := NewShared(redistest.Client(b), redistest.Prefix(b)+"bench", SharedOptions{Ratio: c, Timeout: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if !s.Available() {
			b.Error("the shared budget fell back to its local budget during the benchmark")
		}
	})
	return s
}

// BenchmarkSharedWithdraw measures one Withdraw: a round trip to the real
// server running the script, granted (a write) or refused (no write), next
// to the local Ratio's.
func BenchmarkSharedWithdraw(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		granted bool
	}{{"granted", true}, {"refused", false}} {
		for _, kind := range []string{"shared", "local"} {
			budget := func(b *testing.B) Budget {
				if kind == "shared" {
					return benchShared(b, tc.granted)
				}
				return benchRatio(b, tc.granted)
			}
			b.Run(kind+"/"+tc.name+"/serial", func(b *testing.B) {
				bu := budget(b)
				b.ReportAllocs()
				for b.Loop() {
					if (bu.Withdraw(ctx) == nil) != tc.granted {
						b.Fatal("unexpected outcome")
					}
				}
			})
			b.Run(kind+"/"+tc.name+"/parallel", func(b *testing.B) {
				bu := budget(b)
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if (bu.Withdraw(ctx) == nil) != tc.granted {
							panic("unexpected outcome")
						}
					}
				})
			})
		}
	}
}

// BenchmarkSharedRecord measures Record of a first attempt with the default
// batching (a round trip per 100 first attempts, or per second), next to
// the local Ratio's.
func BenchmarkSharedRecord(b *testing.B) {
	ctx := context.Background()
	for _, kind := range []string{"shared", "local"} {
		budget := func(b *testing.B) Budget {
			if kind == "shared" {
				return benchShared(b, false)
			}
			return benchRatio(b, false)
		}
		b.Run(kind+"/serial", func(b *testing.B) {
			bu := budget(b)
			b.ReportAllocs()
			for b.Loop() {
				bu.Record(ctx, Outcome{})
			}
		})
		b.Run(kind+"/parallel", func(b *testing.B) {
			bu := budget(b)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					bu.Record(ctx, Outcome{})
				}
			})
		})
	}
}

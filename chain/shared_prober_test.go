package chain_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/chain"
	"github.com/redis/go-redis/v9"
)

// redisClock keeps m's TIME (the clock the shared breakers' publications
// are kept on) on the bubble's clock until stop is closed.
func redisClock(m *miniredis.Miniredis, stop <-chan struct{}, wg *sync.WaitGroup) {
	wg.Go(func() {
		for {
			m.SetTime(time.Now())
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
}

// Issue 24: four replicas sharing a primary through a 5-minute outage, each
// with five callers calling once a second, with a fallback. Every replica's breaker opens on its
// own (the outage trips them all at once), and each probed the primary
// every 5s: 4 x 12 probes a minute. One replica now probes for all: at most
// 12 requests a minute reach the dead primary, and every replica is served
// by the primary again within 10s of its recovery.
func TestSharedOutageOneProberAmongReplicas(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		const replicas = 4
		const outage = 5 * time.Minute
		const callersEach = 5 // per replica, each calling once a second: the first failures open every breaker at once
		f := newFleet(t, m.Addr(), fleetOptions{n: replicas, shared: &chain.SharedConfig{Timeout: 100 * time.Millisecond}})
		var clock sync.WaitGroup
		stop := make(chan struct{})
		redisClock(m, stop, &clock)
		f.primary.mode.Store(overloaded)
		start := time.Now()

		var mu sync.Mutex
		first := make([]time.Duration, replicas) // after the recovery, when each replica was first served by the primary
		last := make([]string, replicas)         // who served each replica's last call
		var callers sync.WaitGroup
		for k := range replicas * callersEach {
			i := k % replicas
			callers.Go(func() {
				for time.Since(start) < outage+15*time.Second {
					res, err := f.replicas[i].Call(context.Background(), ask)
					if err != nil {
						t.Errorf("replica %d at %v: %v", i, time.Since(start), err)
						return
					}
					mu.Lock()
					if at := time.Since(start) - outage; at >= 0 && res.Served.Target == "primary" && first[i] == 0 {
						first[i] = at + time.Nanosecond
					}
					last[i] = res.Served.Target
					mu.Unlock()
					time.Sleep(time.Second)
				}
			})
		}

		// Every breaker is open within the first second; from then on each
		// request to the primary is a probe.
		time.Sleep(time.Second)
		var perMinute []int64
		for at := time.Second; at < outage; at += time.Minute {
			n0 := f.primary.n.Load()
			time.Sleep(min(time.Minute, outage-at))
			perMinute = append(perMinute, f.primary.n.Load()-n0)
		}
		f.primary.mode.Store(healthy)
		callers.Wait()
		close(stop)
		clock.Wait()

		t.Logf("requests to the dead primary each minute: %v; served by the primary after its recovery: %v", perMinute, first)
		for k, n := range perMinute {
			if n > 12 {
				t.Errorf("minute %d of the outage: %d requests to the dead primary from %d replicas; want at most 12 (one prober)", k+1, n, replicas)
			}
		}
		for i := range replicas {
			if first[i] == 0 || first[i] > 10*time.Second || last[i] != "primary" {
				t.Errorf("replica %d: first served by the primary %v after its recovery (0: never), last call by %q; want within 10s, and the primary since",
					i, first[i], last[i])
			}
		}
	})
}

// Issue 24: a replica with nowhere else to go whose breaker another replica
// holds open failed its call at once (ErrOpenElsewhere), though it had time
// left and the other replica's probe was a few seconds away. It now waits
// for that probe and is served once it succeeds.
func TestSharedNoFallbackWaitsForAnotherReplicasProbe(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		var clock sync.WaitGroup
		stop := make(chan struct{})
		redisClock(m, stop, &clock)
		primary := &flaky{name: "anthropic"}
		opts := chain.SharedConfig{Timeout: sharedTestTimeout}
		var cs []*chain.Chain
		for range 2 {
			c := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1, PoolSize: 4})
			t.Cleanup(func() { _ = c.Close() })
			ch, err := chain.New("solo").Shared(sharedStore(t, c), opts).
				Primary(chain.Target{Name: "primary", Provider: primary, Model: "claude",
					Breaker: breaker.Config{ConsecutiveFailures: 1}}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(ch.Close)
			cs = append(cs, ch)
		}
		defer func() { close(stop); clock.Wait() }()

		primary.mode.Store(overloaded)
		if _, err := cs[0].Call(context.Background(), ask); err == nil {
			t.Fatal("setup: replica 0's call was served by the overloaded primary")
		}
		n0 := primary.n.Load() // replica 0's breaker is open and published
		propagate()
		primary.mode.Store(healthy)

		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var res *chain.Result
		var err error
		var done sync.WaitGroup
		start := time.Now()
		done.Go(func() { res, err = cs[1].Call(ctx, ask) })
		synctest.Wait()
		if got := primary.n.Load(); got != n0 {
			t.Fatalf("replica 1 sent %d requests to the primary replica 0 holds open; want none before its probe", got-n0)
		}
		// Replica 0's next call, once its opening has passed, is the probe.
		time.Sleep(opening(breakerOpenFor) + time.Millisecond)
		if r, perr := cs[0].Call(context.Background(), ask); perr != nil {
			t.Fatalf("replica 0's probe: %v\n%s", perr, path(r))
		}
		done.Wait()
		took := time.Since(start)
		if err != nil {
			t.Fatalf("replica 1's call, which had 20s left: %v\n%s", err, path(res))
		}
		if res.Served.Target != "primary" || took > opening(breakerOpenFor)+time.Second {
			t.Fatalf("replica 1: served by %q after %v; want the primary right after replica 0's probe", res.Served.Target, took)
		}
		if got := primary.n.Load() - n0; got != 2 {
			t.Fatalf("%d requests to the primary after it opened; want 2: replica 0's probe and replica 1's call", got)
		}
	})
}

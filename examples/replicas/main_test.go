package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: the fakes, the
// Redis clients and the miniredis servers are all closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The incidents run inside testing/synctest bubbles: the breaker's OpenFor
// passes in virtual time, so a test takes milliseconds. miniredis is
// started outside the bubble (its goroutines must not belong to it); the
// replicas' go-redis clients and the fakes' in-process transports are made
// inside it and closed before it ends.

const replicas = 4

// TestIncident plays the incident with and without sharing on miniredis
// and checks the providers' view of it, call by call.
func TestIncident(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		o := options{Replicas: replicas, RedisAddr: m.Addr(), Prefix: "test-incident", OpenFor: 2 * time.Second, RedisTimeout: 10 * time.Second}
		with, err := play(context.Background(), o, true)
		if err != nil {
			t.Fatal(err)
		}
		checkShared(t, with)
		without, err := play(context.Background(), o, false)
		if err != nil {
			t.Fatal(err)
		}
		checkUnshared(t, without)

		a, b := with.totals(), without.totals()
		if a[2].primary*replicas != b[2].primary {
			t.Errorf("outage: the primary got %d requests with sharing, %d without; want one replica's worth with sharing, a quarter",
				a[2].primary, b[2].primary)
		}
		if a[3].fallback != 1 || b[3].fallback != replicas {
			t.Errorf("rate limit: the fallback got %d requests with sharing, %d without; want 1 and %d", a[3].fallback, b[3].fallback, replicas)
		}
	})
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("keys left in Redis after the run: %q", keys)
	}
}

// TestIncidentOnRedis plays the shared incident on the Redis server the
// module's integration tests use (skipped when there is none, failed under
// CI).
func TestIncidentOnRedis(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := strings.TrimSuffix(redistest.Prefix(t), ":")
	synctest.Test(t, func(t *testing.T) {
		o := options{Replicas: replicas, RedisAddr: addr, Prefix: prefix, OpenFor: 2 * time.Second, RedisTimeout: 10 * time.Second}
		with, err := play(context.Background(), o, true)
		if err != nil {
			t.Fatal(err)
		}
		checkShared(t, with)
	})
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	keys, err := c.Keys(context.Background(), prefix+":*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("keys left under %s after the run: %q (%v)", prefix, keys, err)
	}
}

// checkShared checks the shared incident: one replica's failures open the
// breaker, the others send the primary nothing until that replica's one
// probe, then everyone uses it.
func checkShared(t *testing.T, inc *incident) {
	t.Helper()
	byPhase := phaseCalls(inc)

	for _, c := range byPhase[1] {
		if served(c) != primary || c.primary != 1 || c.fallback != 0 {
			t.Errorf("healthy: %s", show(c))
		}
	}

	// The outage: replica 1's first call tries the primary three times and
	// opens its breaker; every other call of the outage and of the rate
	// limit sends the primary nothing.
	first := byPhase[2][0]
	if first.replica != 1 || first.primary != failuresToOpen || !slices.Equal(first.changes, []breaker.State{breaker.Open}) ||
		served(first) != fallback {
		t.Errorf("outage, first call: %s; want replica 1, %d requests to the primary, its breaker opened, served by the fallback",
			show(first), failuresToOpen)
	}
	for _, c := range slices.Concat(byPhase[2][1:], byPhase[3]) {
		if c.primary != 0 {
			t.Errorf("after replica 1's breaker opened, the primary got a request: %s", show(c))
		}
		want := breaker.ErrOpenElsewhere
		if c.replica == 1 {
			want = breaker.ErrOpen // its own
		}
		if err := skip(c, primary); !errors.Is(err, want) || c.replica == 1 && errors.Is(err, breaker.ErrOpenElsewhere) {
			t.Errorf("the primary's skip: %v; want %v: %s", err, want, show(c))
		}
	}
	for _, c := range byPhase[2] {
		if served(c) != fallback || c.fallback != 1 {
			t.Errorf("outage: %s; want served by the fallback with one request", show(c))
		}
	}

	// The rate limit: replica 1's 429 closes the fallback for all.
	for _, c := range byPhase[3] {
		if !c.res.Degraded || c.err != nil {
			t.Errorf("rate limit: %s; want the degraded answer", show(c))
		}
		if c.replica == 1 {
			if c.fallback != 1 {
				t.Errorf("rate limit: replica 1 sent the fallback %d requests; want 1 (the 429): %s", c.fallback, show(c))
			}
			continue
		}
		if err := skip(c, fallback); c.fallback != 0 || !errors.Is(err, breaker.ErrGateClosed) {
			t.Errorf("rate limit: %s; want the fallback skipped by its gate, without a request", show(c))
		}
	}

	// The recovery: replicas 2-4 keep skipping the primary; replica 1 sends
	// one probe; then everyone is served by the primary.
	rec := byPhase[4]
	if len(rec) != 2*replicas {
		t.Fatalf("recovery: %d calls; want %d", len(rec), 2*replicas)
	}
	for _, c := range rec[:replicas-1] {
		if c.replica == 1 || c.primary != 0 || !errors.Is(skip(c, primary), breaker.ErrOpenElsewhere) || len(c.changes) != 0 {
			t.Errorf("recovery, before the probe: %s; want replicas 2-%d skipping the primary, open elsewhere", show(c), replicas)
		}
	}
	probe := rec[replicas-1]
	if probe.replica != 1 || probe.primary != 1 || served(probe) != primary ||
		!slices.Equal(probe.changes, []breaker.State{breaker.HalfOpen, breaker.Closed}) {
		t.Errorf("recovery, the probe: %s; want replica 1's one probe, served by the primary, closing its breaker", show(probe))
	}
	for _, c := range rec[replicas:] {
		if served(c) != primary || c.primary != 1 || len(c.changes) != 0 {
			t.Errorf("recovery, after the probe: %s; want served by the primary with one request", show(c))
		}
	}
	if n := probes(inc); n != 1 {
		t.Errorf("recovery: %d probes; want 1", n)
	}
}

// checkUnshared checks the same incident without sharing: every replica
// finds out for itself.
func checkUnshared(t *testing.T, inc *incident) {
	t.Helper()
	byPhase := phaseCalls(inc)
	for _, c := range byPhase[2][:replicas] {
		if c.primary != failuresToOpen || !slices.Equal(c.changes, []breaker.State{breaker.Open}) {
			t.Errorf("outage without sharing: %s; want each replica to open its own breaker after %d requests", show(c), failuresToOpen)
		}
	}
	for _, c := range byPhase[2][replicas:] {
		if c.primary != 0 || !errors.Is(skip(c, primary), breaker.ErrOpen) || errors.Is(skip(c, primary), breaker.ErrOpenElsewhere) {
			t.Errorf("outage without sharing, second round: %s; want the primary skipped by the replica's own breaker", show(c))
		}
	}
	for _, c := range byPhase[3] {
		if c.fallback != 1 {
			t.Errorf("rate limit without sharing: %s; want each replica to get its own 429", show(c))
		}
	}
	if n := probes(inc); n != replicas {
		t.Errorf("recovery without sharing: %d probes; want %d, one per replica", n, replicas)
	}
	for _, c := range byPhase[4] {
		if served(c) != primary {
			t.Errorf("recovery without sharing: %s; want served by the primary", show(c))
		}
	}
}

// TestRunOutput runs the program's scenario as main does and checks the
// lines an engineer would read.
func TestRunOutput(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		var out bytes.Buffer
		if err := run(&out, options{Replicas: 3, RedisAddr: m.Addr(), Prefix: "test-run", RedisTimeout: 10 * time.Second}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"Redis: " + m.Addr() + ".",
			"replicas 1-3  calls 1-2  served by sonnet\n",
			"replica 1     call 3  sonnet 529 529 529: breaker opened -> served by gpt-fallback\n",
			"replicas 2-3  call 3  sonnet skipped (open on another replica) -> served by gpt-fallback\n",
			"replica 1     call 5  sonnet skipped (own breaker open), gpt-fallback 429: Retry-After 2m0s, gate closed -> degraded answer\n",
			"replicas 2-3  call 6  sonnet skipped (open on another replica), gpt-fallback skipped (gate closed by another replica's Retry-After) -> degraded answer\n",
			"replica 1     call 6  sonnet probe 200: breaker closed -> served by sonnet\n",
			"replicas 1-3  call 7  served by sonnet\n",
			//                         calls  sonnet     fallback     degraded
			"  2 outage            6         3          9         6            6         0          0\n",
			"Recovery: 1 probe with sharing, 3 without",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the output lacks %q:\n%s", want, out.String())
			}
		}
		if n := strings.Count(out.String(), "\n"); n > 50 {
			t.Errorf("the output is %d lines long; keep it short:\n%s", n, out.String())
		}
	})
	if keys := m.Keys(); len(keys) != 0 {
		t.Errorf("keys left in Redis after the run: %q", keys)
	}
}

// TestFindRedisFallsBackToMiniredis: an address that does not answer,
// even one given explicitly, falls back to an in-process miniredis, and
// the output says so.
func TestFindRedisFallsBackToMiniredis(t *testing.T) {
	t.Setenv(envRedis, "127.0.0.1:1")
	var out bytes.Buffer
	addr, stop, err := findRedis(&out)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, want := range []string{"no answer to a PING at 127.0.0.1:1 ($BACKSTOP_REDIS_ADDR)", "using an in-process miniredis at " + addr} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, out.String())
		}
	}
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer c.Close()
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Errorf("the fallback at %s does not answer: %v", addr, err)
	}
}

func TestRunRejectsBadReplicas(t *testing.T) {
	for _, n := range []int{0, -1, 101} {
		if err := run(new(bytes.Buffer), options{Replicas: n}); err == nil || !strings.Contains(err.Error(), "-replicas") {
			t.Errorf("Replicas %d: err = %v; want one naming -replicas", n, err)
		}
	}
}

// phaseCalls groups an incident's calls by phase, in order.
func phaseCalls(inc *incident) map[int][]call {
	m := map[int][]call{}
	for _, c := range inc.calls {
		m[c.phase] = append(m[c.phase], c)
	}
	return m
}

// served is what answered c: a target's name, or "degraded".
func served(c call) string {
	if c.err != nil || c.res.Degraded {
		return "degraded"
	}
	return c.res.Served.Target
}

// skip returns the error of the call's skip of target, or nil.
func skip(c call, target string) error {
	for _, a := range c.res.Attempts {
		if a.Target == target && a.Decision == chain.DecisionSkip && a.N == 0 {
			return a.Err
		}
	}
	return nil
}

// show describes a call for failure messages.
func show(c call) string {
	var b strings.Builder
	fmt.Fprintf(&b, "replica %d call %d (phase %d): %s [primary %d requests, fallback %d, breaker %v]",
		c.replica, c.n, c.phase, describe(c), c.primary, c.fallback, c.changes)
	for _, a := range c.res.Attempts {
		fmt.Fprintf(&b, "\n    %v", a)
	}
	return b.String()
}

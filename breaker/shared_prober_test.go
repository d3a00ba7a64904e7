package breaker_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/backstop-llm/backstop/retry"
)

// clockStore is a breaker.Store in memory on the test's clock, as Redis
// keeps it on its own: each publication is an end, the later one kept, and
// forgotten once it has passed.
type clockStore struct {
	mu   sync.Mutex
	open map[string]time.Time
	down bool // every round trip fails
}

var errStoreDown = errors.New("store down")

func (m *clockStore) Key() string { return "k" }

func (m *clockStore) Load(context.Context) ([]remote.Published, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return nil, "", errStoreDown
	}
	var out []remote.Published
	for name, end := range m.open {
		if left := time.Until(end); left > 0 {
			out = append(out, remote.Published{Name: name, Open: left})
		}
	}
	return out, "", nil
}

func (m *clockStore) PublishOpen(_ context.Context, name string, d time.Duration) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.down {
		return "", errStoreDown
	}
	if end := time.Now().Add(d); end.After(m.open[name]) {
		m.open[name] = end
	}
	return "", nil
}

func (m *clockStore) PublishClosed(_ context.Context, name string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.open, name)
	return "", nil
}

func (m *clockStore) PublishGate(context.Context, string, time.Duration) (string, error) {
	return "", nil
}

// sharedReplicas returns n replicas' breakers (the defaults, but opening
// on one failure) for target "a", each tracked by its own Shared over
// store.
func sharedReplicas(t *testing.T, store breaker.Store, n int) ([]*breaker.Shared, []*breaker.Breaker) {
	t.Helper()
	var ss []*breaker.Shared
	var bs []*breaker.Breaker
	for range n {
		s, err := breaker.NewShared(store, breaker.SharedConfig{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		b, err := breaker.New("a", breaker.Config{ConsecutiveFailures: 1})
		if err != nil {
			t.Fatal(err)
		}
		s.Track("a", b, nil, 0)
		ss, bs = append(ss, s), append(bs, b)
	}
	return ss, bs
}

// Issue 24: replicas whose breakers open at the same instant (a total
// outage trips them all within one Refresh) published openings that end
// together, and each probed the target every 5s: N replicas, N x 12 probes
// a minute. Their openings now draw apart (JitterShare) and the ones whose
// opening ends first defer their probe to the one whose ends last: after
// the first openings, one replica probes, at most 12 times a minute, and
// when its probe succeeds every replica uses the target again within 10s.
func TestSharedTiedOpeningsLeaveOneProber(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const n = 3
		store := &clockStore{open: map[string]time.Time{}}
		ss, bs := sharedReplicas(t, store, n)
		healthy := false
		probes := make([]int, n)
		var firstMinute int
		served := make([]time.Duration, n) // since recovery: when each first used the target
		start := time.Now()
		const outage = 5 * time.Minute
		for tick := 0; ; tick++ {
			now := time.Since(start)
			if now == time.Minute {
				firstMinute = sum(probes)
			}
			if now == outage {
				healthy = true
			}
			if now > outage+15*time.Second {
				break
			}
			for i := range n {
				if err := ss[i].Sync(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for i := range n { // every replica calls at the same instant, every 100ms
				tk, err := bs[i].Allow()
				if err != nil {
					continue
				}
				if !healthy {
					if tick > 0 {
						probes[i]++
					}
					tk.Report(retry.Failure)
				} else {
					tk.Report(retry.NotFailure)
					if served[i] == 0 {
						served[i] = now - outage + time.Nanosecond
					}
				}
				if err := ss[i].Publish(ctx, bs[i]); err != nil {
					t.Fatal(err)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		total := sum(probes)
		t.Logf("probes in %v of outage: %v (first minute %d)", outage, probes, firstMinute)
		// One prober, one probe each 5-6s: 50-60 in 5 minutes; one more per
		// opening whose jitter left two ends within Slack.
		if total > int(outage/time.Minute)*12 || firstMinute > 12 {
			t.Errorf("%d probes in %v (%d in the first minute), by replica %v; want at most 12 a minute for all replicas together",
				total, outage, firstMinute, probes)
		}
		for i, d := range served {
			if d == 0 || d > 10*time.Second {
				t.Errorf("replica %d used the recovered target %v after its recovery (0: never); want within 10s", i, d)
			}
		}
	})
}

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// Issue 24: Wait returned ErrOpenElsewhere at once while another replica
// held the breaker open, though that replica's probe was seconds away. A
// waiter now waits for the publication's withdrawal (the probe succeeded)
// and is released on the ramp from it; without a withdrawal it gives up
// when its context ends.
func TestWaitForAnotherReplicasProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &clockStore{open: map[string]time.Time{}}
		ss, bs := sharedReplicas(t, store, 2)
		tk, _ := bs[0].Allow()
		tk.Report(retry.Failure) // replica 0 opens
		if err := ss[0].Publish(ctx, bs[0]); err != nil {
			t.Fatal(err)
		}
		if err := ss[1].Sync(ctx); err != nil {
			t.Fatal(err)
		}

		short, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		start := time.Now()
		if _, err := bs[1].Wait(short); !errors.Is(err, breaker.ErrOpenElsewhere) || time.Since(start) != time.Second {
			t.Fatalf("a waiter whose context ends first: %v after %v; want ErrOpenElsewhere after 1s", err, time.Since(start))
		}

		const herd = 4
		got := make([]time.Duration, herd)
		var wg sync.WaitGroup
		start = time.Now()
		for i := range herd {
			wg.Go(func() {
				tk, err := bs[1].Wait(ctx)
				if err != nil {
					t.Errorf("waiter %d: %v", i, err)
					return
				}
				got[i] = time.Since(start)
				tk.Report(retry.NotFailure)
			})
		}
		time.Sleep(bs[0].OpenInterval() + time.Nanosecond)
		tk, err := bs[0].Allow() // replica 0's probe
		if err != nil {
			t.Fatalf("replica 0's probe: %v", err)
		}
		tk.Report(retry.NotFailure)
		if err := ss[0].Publish(ctx, bs[0]); err != nil { // withdraws
			t.Fatal(err)
		}
		probed := time.Since(start)
		time.Sleep(100 * time.Millisecond)
		if err := ss[1].Sync(ctx); err != nil { // the poller's next read
			t.Fatal(err)
		}
		wg.Wait()
		slices.Sort(got)
		read := probed + 100*time.Millisecond
		want := []time.Duration{read, read + breaker.RampStep, read + breaker.RampStep, read + 2*breaker.RampStep}
		if !slices.Equal(got, want) {
			t.Fatalf("waiters released at %v; want %v: on the ramp from the read that found the publication withdrawn", got, want)
		}
	})
}

// A replica whose own breaker opened, deferring its probe to another
// replica whose opening ends later, holds its waiters until that replica's
// probe succeeds, then sends its own probe and releases them on its ramp.
func TestWaitWhileDeferringToAnotherReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &clockStore{open: map[string]time.Time{}}
		ss, bs := sharedReplicas(t, store, 2)
		for _, b := range bs {
			breaker.NoJitterForTest(b) // replica 0's opening ends 1s after replica 1's
		}
		tk, _ := bs[1].Allow()
		tk.Report(retry.Failure) // replica 1 opens first
		_ = ss[1].Publish(ctx, bs[1])
		time.Sleep(time.Second)
		tk, _ = bs[0].Allow()
		tk.Report(retry.Failure) // replica 0 opens 1s later: its publication ends last
		_ = ss[0].Publish(ctx, bs[0])
		if err := ss[1].Sync(ctx); err != nil {
			t.Fatal(err)
		}
		var err error
		var waited time.Duration
		var wg sync.WaitGroup
		start := time.Now()
		wg.Go(func() {
			var tk breaker.Ticket
			tk, err = bs[1].Wait(ctx)
			waited = time.Since(start)
			tk.Report(retry.NotFailure)
		})
		time.Sleep(bs[1].OpenInterval() + time.Nanosecond) // replica 1's own opening has passed
		synctest.Wait()
		if waited != 0 {
			t.Fatalf("replica 1's waiter returned (%v) before replica 0's probe; want it to defer", err)
		}
		time.Sleep(time.Until(bs[0].ProbeAt()))
		tk, perr := bs[0].Allow()
		if perr != nil {
			t.Fatalf("replica 0's probe: %v", perr)
		}
		tk.Report(retry.NotFailure)
		_ = ss[0].Publish(ctx, bs[0])
		probed := time.Since(start)
		if err := ss[1].Sync(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		if err != nil || waited != probed {
			t.Fatalf("replica 1's waiter: %v after %v; want its own probe's ticket at replica 0's probe (%v)", err, waited, probed)
		}
		if bs[1].State() != breaker.Closed {
			t.Fatalf("replica 1's breaker is %v after its own probe succeeded; want closed", bs[1].State())
		}
	})
}

// A replica whose publication the store took late (it was down when the
// breaker opened) reads back its own publication ending later than its
// opening's own estimate: it must not defer its probe to itself.
func TestSharedLatePublicationIsNotAnotherReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &clockStore{open: map[string]time.Time{}, down: true}
		ss, bs := sharedReplicas(t, store, 1)
		tk, _ := bs[0].Allow()
		tk.Report(retry.Failure)
		if err := ss[0].Publish(ctx, bs[0]); err == nil {
			t.Fatal("setup: the store took the publication")
		}
		time.Sleep(breaker.DefaultProbeEvery + time.Millisecond)
		store.mu.Lock()
		store.down = false
		store.mu.Unlock()
		for range 2 { // tells it again, 1s late; reads it back
			if err := ss[0].Sync(ctx); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(time.Until(bs[0].ProbeAt()))
		if _, err := bs[0].Allow(); err != nil {
			t.Fatalf("the probe, once the opening has passed: %v; want it sent (the publication read back is this replica's own)", err)
		}
	})
}

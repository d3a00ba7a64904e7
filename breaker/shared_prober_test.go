package breaker_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/retry"
)

// clockStore is a breaker.Store in memory on the test's clock, as Redis
// keeps it on its own: each publication is an end, the later one kept, and
// forgotten once it has passed.
type clockStore struct {
	mu   sync.Mutex
	open map[string]time.Time
}

func (m *clockStore) Key() string { return "k" }

func (m *clockStore) Load(context.Context) ([]breaker.Remote, string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []breaker.Remote
	for name, end := range m.open {
		if left := time.Until(end); left > 0 {
			out = append(out, breaker.Remote{Name: name, Open: left})
		}
	}
	return out, "", nil
}

func (m *clockStore) PublishOpen(_ context.Context, name string, d time.Duration) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
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

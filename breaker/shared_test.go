package breaker_test

// Tests of Shared's own logic on a store in memory. Shared on Redis (the
// scripts, and Redis down, slow or answering errors) is tested in
// redisstore.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/backstop-llm/backstop/llm"
)

// memStore is a breaker.Store in memory that counts its round trips. Its
// fail, when set, is returned by every method; with block set, they wait
// for their context to end instead; repaired is reported by every one.
// opens lists every duration PublishOpen took, in order.
type memStore struct {
	mu       sync.Mutex
	key      string
	open     map[string]time.Duration
	gate     map[string]time.Duration
	runs     int
	fail     error
	block    bool
	repaired string
	opens    []time.Duration
}

func newMemStore() *memStore {
	return &memStore{key: "k", open: map[string]time.Duration{}, gate: map[string]time.Duration{}}
}

func (m *memStore) Key() string { return m.key }

func (m *memStore) enter(ctx context.Context) (string, error) {
	m.mu.Lock()
	m.runs++
	fail, block, repaired := m.fail, m.block, m.repaired
	m.mu.Unlock()
	if block {
		<-ctx.Done()
		return "", ctx.Err()
	}
	return repaired, fail
}

func (m *memStore) Load(ctx context.Context) ([]remote.Published, string, error) {
	repaired, err := m.enter(ctx)
	if err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []remote.Published
	for name, d := range m.open {
		out = append(out, remote.Published{Name: name, Open: d, Gate: m.gate[name]})
	}
	for name, d := range m.gate {
		if _, ok := m.open[name]; !ok {
			out = append(out, remote.Published{Name: name, Gate: d})
		}
	}
	return out, repaired, nil
}

func (m *memStore) PublishOpen(ctx context.Context, name string, d time.Duration) (string, error) {
	repaired, err := m.enter(ctx)
	if err == nil {
		m.mu.Lock()
		m.open[name] = max(m.open[name], d)
		m.opens = append(m.opens, d)
		m.mu.Unlock()
	}
	return repaired, err
}

func (m *memStore) PublishClosed(ctx context.Context, name string) (string, error) {
	repaired, err := m.enter(ctx)
	if err == nil {
		m.mu.Lock()
		delete(m.open, name)
		m.mu.Unlock()
	}
	return repaired, err
}

func (m *memStore) PublishGate(ctx context.Context, name string, d time.Duration) (string, error) {
	repaired, err := m.enter(ctx)
	if err == nil {
		m.mu.Lock()
		m.gate[name] = max(m.gate[name], d)
		m.mu.Unlock()
	}
	return repaired, err
}

// reply is an error reply of a Redis client, as go-redis's have.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func TestSharedOnAStore(t *testing.T) {
	ctx := context.Background()
	m := newMemStore()
	s, err := breaker.NewShared(m, breaker.SharedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if s.SlackBound() != 50*time.Millisecond+time.Millisecond {
		t.Fatalf("Slack() = %v; want the default Timeout plus a millisecond", s.SlackBound())
	}
	for _, err := range []error{s.PublishOpen(ctx, "a", time.Minute), s.PublishGate(ctx, "b", time.Second),
		s.PublishOpen(ctx, "c", time.Hour), s.PublishClosed(ctx, "c")} {
		if err != nil {
			t.Fatal(err)
		}
	}
	rs, err := s.Load(ctx)
	slices.SortFunc(rs, func(a, b remote.Published) int { return strings.Compare(a.Name, b.Name) })
	if want := []remote.Published{{Name: "a", Open: time.Minute}, {Name: "b", Gate: time.Second}}; err != nil || !slices.Equal(rs, want) {
		t.Fatalf("Load = %+v, %v; want %+v", rs, err, want)
	}
	if m.runs != 5 || !s.Available() {
		t.Fatalf("%d round trips, Available %v; want 5, true", m.runs, s.Available())
	}
	for _, tc := range []struct {
		name  string
		store breaker.Store
		want  string
	}{{"nil store", nil, "store is nil"}, {"empty key", &memStore{}, "key is empty"}} {
		if s, err := breaker.NewShared(tc.store, breaker.SharedConfig{}); s != nil || !errors.Is(err, llm.ErrInvalidConfig) ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewShared = %v, %v; want llm.ErrInvalidConfig saying %q", tc.name, s, err, tc.want)
		}
	}
}

// A store that fails is left alone for ProbeEvery, once said so; an error
// reply is logged again at each probe that finds it; a store that does not
// answer costs the Timeout; a caller's end says nothing about the store; a
// repair is logged each time.
func TestSharedStoreFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newMemStore()
		var logs bytes.Buffer
		var calls []error
		const probeEvery = time.Minute
		s, err := breaker.NewShared(m, breaker.SharedConfig{ProbeEvery: probeEvery, Timeout: 50 * time.Millisecond,
			OnError: func(err error) { calls = append(calls, err) }, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		m.fail = reply("NOPERM no permissions")
		if _, err := s.Load(ctx); !errors.Is(err, breaker.ErrSharedUnavailable) || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("Load: %v; want ErrSharedUnavailable wrapping NOPERM", err)
		}
		for i, err := range []error{s.PublishOpen(ctx, "a", time.Second), s.PublishGate(ctx, "a", time.Second), s.PublishClosed(ctx, "a")} {
			if !errors.Is(err, breaker.ErrSharedUnavailable) || !strings.Contains(err.Error(), "ProbeEvery (1m0s)") {
				t.Fatalf("call %d while left alone: %v; want ErrSharedUnavailable naming ProbeEvery", i, err)
			}
		}
		if m.runs != 1 || s.Available() || len(calls) != 1 || strings.Count(logs.String(), "level=WARN") != 1 {
			t.Fatalf("%d round trips, Available %v, OnError %v, log:\n%s\nwant 1, false, one call, one record", m.runs, s.Available(), calls, logs.String())
		}
		time.Sleep(probeEvery)
		_, _ = s.Load(ctx) // the probe finds the same reply
		if m.runs != 2 || strings.Count(logs.String(), "still unavailable, Redis answers with an error") != 1 || len(calls) != 1 {
			t.Fatalf("%d round trips, OnError %v, log:\n%s\nwant a probe logging the lasting reply again", m.runs, calls, logs.String())
		}

		m.fail, m.block = nil, true
		time.Sleep(probeEvery)
		start := time.Now()
		if _, err := s.Load(ctx); !errors.Is(err, breaker.ErrSharedUnavailable) || !strings.Contains(err.Error(), "within the Timeout (50ms)") {
			t.Fatalf("Load of a store that does not answer: %v; want ErrSharedUnavailable naming the Timeout", err)
		}
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Fatalf("a store that does not answer cost %v; want the Timeout, 50ms", d)
		}

		m.block, m.repaired = false, "string"
		time.Sleep(probeEvery)
		if _, err := s.Load(ctx); err != nil || !s.Available() || len(calls) != 2 || calls[1] != nil {
			t.Fatalf("Load with the store back: %v, Available %v, OnError %v; want nil, true, a nil call", err, s.Available(), calls)
		}
		if err := s.PublishGate(ctx, "a", time.Second); err != nil || strings.Count(logs.String(), "the key held a string") != 2 {
			t.Fatalf("PublishGate: %v; log:\n%s\nwant one repair record per round trip", err, logs.String())
		}

		m.repaired, m.block = "", true
		cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		if _, err := s.Load(cctx); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, breaker.ErrSharedUnavailable) {
			t.Fatalf("Load under a caller's 10ms deadline: %v; want the caller's DeadlineExceeded, not ErrSharedUnavailable", err)
		}
		if !s.Available() || len(calls) != 2 {
			t.Fatalf("the caller's deadline was blamed on the store: Available %v, OnError %v", s.Available(), calls)
		}
	})
}

package budget

// Tests of Shared's own logic on a store in memory. Shared on Redis (the
// script's window, floor, refunds, repairs, and Redis down, slow or
// answering errors) is tested in redisstore.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/internal/remote"
	"github.com/backstop-llm/backstop/llm"
)

// memStore is a Store in memory with one bucket that never rolls, enough
// for Shared's own logic. Its fail, when set, is returned by every Run;
// with block set, Run waits for its context to end instead.
type memStore struct {
	mu              sync.Mutex
	key             string
	firsts, retries int64
	runs            int
	fail            error
	block           bool
	last            remote.BudgetOp
}

func (m *memStore) Key() string { return m.key }

func (m *memStore) Run(ctx context.Context, op remote.BudgetOp) (remote.BudgetResult, error) {
	m.mu.Lock()
	m.runs++
	m.last = op
	fail, block := m.fail, m.block
	m.mu.Unlock()
	if block {
		<-ctx.Done()
		return remote.BudgetResult{}, ctx.Err()
	}
	if fail != nil {
		return remote.BudgetResult{}, fail
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.firsts += op.Pending
	var granted bool
	switch op.Kind {
	case remote.BudgetWithdraw:
		if m.retries < max(op.Floor, m.firsts*op.Ratio/ppm) {
			m.retries++
			granted = true
		}
	case remote.BudgetRefund:
		if m.retries > 0 {
			m.retries--
		}
	}
	return remote.BudgetResult{Granted: granted, Firsts: m.firsts, Retries: m.retries}, nil
}

// reply is an error reply of a Redis client, as go-redis's have.
type reply string

func (r reply) Error() string { return string(r) }
func (reply) RedisError()     {}

func newMemShared(t *testing.T, m *memStore, opts SharedConfig) *Shared {
	t.Helper()
	s, err := NewShared(m, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewSharedOptions(t *testing.T) {
	m := &memStore{key: "k"}
	s := newMemShared(t, m, SharedConfig{})
	if s.timeout != defaultSharedTimeout || s.flushEvery != int64(defaultFlushEvery) ||
		s.flushAfter != defaultFlushAfter || s.health.ProbeEvery() != defaultProbeEvery || s.key != "k" {
		t.Fatalf("defaults: timeout %v flushEvery %v flushAfter %d probeEvery %v key %q", s.timeout,
			time.Duration(s.flushEvery), s.flushAfter, s.health.ProbeEvery(), s.key)
	}
	if s.settings() != (RatioConfig{}).withDefaults() {
		t.Fatalf("Config() = %+v; want the defaults", s.settings())
	}
	if r, ok := s.local.(*Ratio); !ok || r.settings() != s.settings() {
		t.Fatalf("default Local is %T %+v; want a *Ratio of the shared configuration", s.local, s.local)
	}
	if !s.Available() {
		t.Fatal("a new Shared budget is not Available")
	}
	// The window every round trip gives the store: Ratio's buckets.
	want := remote.BudgetOp{Bucket: time.Second, Buckets: bucketCount, Ratio: 100_000, Floor: defaultMinRetries, TTL: 20 * time.Second}
	if s.shape != want {
		t.Fatalf("window %+v; want %+v", s.shape, want)
	}
	local := Unlimited()
	s = newMemShared(t, m, SharedConfig{Ratio: RatioConfig{Ratio: 0.5, MinRetries: -1, Window: 15 * time.Millisecond}, Local: local,
		Timeout: time.Second, FlushEvery: time.Minute, FlushAfter: 7, ProbeEvery: time.Hour})
	if s.local != local || s.timeout != time.Second || s.flushEvery != int64(time.Minute) ||
		s.flushAfter != 7 || s.health.ProbeEvery() != time.Hour || s.settings().Ratio != 0.5 {
		t.Fatalf("options not kept: %+v", s)
	}
	want = remote.BudgetOp{Bucket: 1500 * time.Microsecond, Buckets: bucketCount, Ratio: 500_000, TTL: 30 * time.Millisecond}
	if s.shape != want {
		t.Fatalf("window %+v; want %+v (no floor; the TTL two windows, in whole milliseconds)", s.shape, want)
	}
	if err := s.Withdraw(context.Background()); !errors.Is(err, ErrExhausted) || m.last.Kind != remote.BudgetWithdraw || m.last.Ratio != 500_000 {
		t.Fatalf("Withdraw = %v, the store ran %+v; want ErrExhausted from an remote.BudgetWithdraw of the window", err, m.last)
	}

	for _, tc := range []struct {
		name  string
		store Store
		want  string
	}{
		{"nil store", nil, "store is nil"},
		{"empty key", &memStore{}, "key is empty"},
	} {
		if s, err := NewShared(tc.store, SharedConfig{}); s != nil || !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewShared = %v, %v; want llm.ErrInvalidConfig saying %q", tc.name, s, err, tc.want)
		}
	}
}

// A store that fails makes the Local budget decide, leaves the store alone
// for ProbeEvery and says so once; an error reply is logged again at each
// probe that finds it; a store that does not answer costs the Timeout;
// a caller's end says nothing about the store.
func TestSharedStoreFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := &memStore{key: "k"}
		var logs bytes.Buffer
		var calls []error
		local, _ := NewRatio(RatioConfig{MinRetries: 2})
		const probeEvery = time.Minute
		s := newMemShared(t, m, SharedConfig{Local: local, ProbeEvery: probeEvery, Timeout: 50 * time.Millisecond,
			OnError: func(err error) { calls = append(calls, err) }, Logger: slog.New(slog.NewTextHandler(&logs, nil))})

		m.fail = reply("NOPERM no permissions")
		for range 2 {
			if err := s.Withdraw(ctx); err != nil {
				t.Fatalf("Withdraw with the store failing: %v; want Local's grant", err)
			}
		}
		if err := s.Withdraw(ctx); !errors.Is(err, ErrExhausted) {
			t.Fatalf("a third Withdraw: %v; want Local's ErrExhausted", err)
		}
		if m.runs != 1 || s.Available() || len(calls) != 1 || !errors.Is(calls[0], ErrSharedUnavailable) ||
			!strings.Contains(calls[0].Error(), "NOPERM") {
			t.Fatalf("%d runs, Available %v, OnError %v; want 1, false, one NOPERM matching ErrSharedUnavailable", m.runs, s.Available(), calls)
		}
		time.Sleep(probeEvery)
		_ = s.Withdraw(ctx) // the probe finds the same reply
		if m.runs != 2 || strings.Count(logs.String(), "still unavailable, Redis answers with an error") != 1 || len(calls) != 1 {
			t.Fatalf("%d runs, OnError %v, log:\n%s\nwant a probe logging the lasting reply again", m.runs, calls, logs.String())
		}

		m.fail, m.block = nil, true
		time.Sleep(probeEvery)
		start := time.Now()
		_ = s.Withdraw(ctx)
		if d := time.Since(start); d != 50*time.Millisecond {
			t.Fatalf("a store that does not answer cost %v; want the Timeout, 50ms", d)
		}

		m.block = false
		time.Sleep(probeEvery)
		if err := s.Withdraw(ctx); err != nil || !s.Available() || len(calls) != 2 || calls[1] != nil {
			t.Fatalf("Withdraw with the store back: %v, Available %v, OnError %v; want a shared grant, true, a nil call", err, s.Available(), calls)
		}

		m.block = true
		cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		if _, _, err := s.Counts(cctx); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrSharedUnavailable) {
			t.Fatalf("Counts under a caller's 10ms deadline: %v; want the caller's DeadlineExceeded, not ErrSharedUnavailable", err)
		}
		if !s.Available() || len(calls) != 2 {
			t.Fatalf("the caller's deadline was blamed on the store: Available %v, OnError %v", s.Available(), calls)
		}
	})
}

// A repair the store reports is logged each time; the store answered.
func TestSharedLogsRepairs(t *testing.T) {
	m := &memStore{key: "k"}
	var logs bytes.Buffer
	s := newMemShared(t, m, SharedConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	repairing := &repairStore{memStore: m, found: "string"}
	s.store = repairing
	for range 2 {
		if err := s.Withdraw(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "the key held a string"); n != 2 || !s.Available() {
		t.Fatalf("%d repair records, Available %v; want 2, true:\n%s", n, s.Available(), logs.String())
	}
}

// repairStore is a memStore that reports a repair on every Run.
type repairStore struct {
	*memStore
	found string
}

func (r *repairStore) Run(ctx context.Context, op remote.BudgetOp) (remote.BudgetResult, error) {
	res, err := r.memStore.Run(ctx, op)
	res.Repaired = r.found
	return res, err
}

package ledger_test

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

	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/llm"
)

// fakeStore is a ledger kept in memory that can fail, hang until its
// context ends, or answer, and counts its calls.
type fakeStore struct {
	ledger.Ledger
	mu       sync.Mutex
	mode     string // "", "fail" or "slow"
	calls    int
	finishes []string // the keys of the Finishes it took
}

var errDown = errors.New("dial tcp 127.0.0.1:6379: connection refused")

func newFake() *fakeStore { return &fakeStore{Ledger: ledger.NewMemory()} }

func (f *fakeStore) set(mode string) {
	f.mu.Lock()
	f.mode = mode
	f.mu.Unlock()
}

func (f *fakeStore) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

func (f *fakeStore) enter(ctx context.Context) error {
	f.mu.Lock()
	f.calls++
	mode := f.mode
	f.mu.Unlock()
	switch mode {
	case "fail":
		return errDown
	case "slow":
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (f *fakeStore) Begin(ctx context.Context, key, owner string, lease time.Duration, takeover bool) (ledger.Entry, error) {
	if err := f.enter(ctx); err != nil {
		return ledger.Entry{}, err
	}
	return f.Ledger.Begin(ctx, key, owner, lease, takeover)
}

func (f *fakeStore) Finish(ctx context.Context, key, owner string, result []byte, ttl time.Duration) error {
	if err := f.enter(ctx); err != nil {
		return err
	}
	err := f.Ledger.Finish(ctx, key, owner, result, ttl)
	if err == nil {
		f.mu.Lock()
		f.finishes = append(f.finishes, key)
		f.mu.Unlock()
	}
	return err
}

func (f *fakeStore) Get(ctx context.Context, key string) (ledger.Entry, error) {
	if err := f.enter(ctx); err != nil {
		return ledger.Entry{}, err
	}
	return f.Ledger.Get(ctx, key)
}

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newShared(t *testing.T, st ledger.Ledger, cfg ledger.SharedConfig) *ledger.Shared {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := ledger.NewShared(st, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewSharedValidates(t *testing.T) {
	_, err := ledger.NewShared(nil, ledger.SharedConfig{Timeout: -1, ProbeEvery: -1, MaxPending: -1})
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("err = %v; want ErrInvalidConfig", err)
	}
	for _, want := range []string{"store is nil", "Timeout", "ProbeEvery", "MaxPending", "redisstore"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// While the store answers, every operation goes to it: a tool call that
// runs is 2 round trips (Begin and Finish), one that replays 1.
func TestSharedPassesThrough(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFake()
		s := newShared(t, f, ledger.SharedConfig{})
		if e, err := s.Begin(ctx, "k", "a", time.Minute, false); err != nil || e.State != ledger.Absent {
			t.Fatalf("Begin = %+v, %v", e, err)
		}
		if err := s.Finish(ctx, "k", "a", []byte("r"), time.Hour); err != nil {
			t.Fatal(err)
		}
		if e, err := s.Begin(ctx, "k", "b", time.Minute, false); err != nil || e.State != ledger.Done || string(e.Result) != "r" {
			t.Fatalf("Begin of a done key = %+v, %v", e, err)
		}
		if err := s.Finish(ctx, "k", "b", nil, 0); !errors.Is(err, ledger.ErrNotOwner) {
			t.Fatalf("Finish by a non-owner = %v; want ErrNotOwner", err)
		}
		if n := f.count(); n != 4 || !s.Available() || s.Pending() != 0 {
			t.Fatalf("%d round trips, available %v, pending %d; want 4, true, 0", n, s.Available(), s.Pending())
		}
	})
}

// A store that hangs costs an operation exactly the Timeout (250ms by
// default), then ErrUnavailable; for ProbeEvery every operation fails at
// once without a round trip, and the key is unchanged, so a retry once
// the store answers is still exactly once. OnError and the log report
// each change once.
func TestSharedSlowStoreFailsWithinTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFake()
		var logs logBuffer
		var changes []error
		s := newShared(t, f, ledger.SharedConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			OnError: func(err error) { changes = append(changes, err) }})
		f.set("slow")
		start := time.Now()
		_, err := s.Begin(ctx, "k", "a", time.Minute, false)
		if took := time.Since(start); !errors.Is(err, ledger.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || took != 250*time.Millisecond {
			t.Fatalf("Begin on a hanging store = %v after %v; want ErrUnavailable wrapping the timeout after 250ms", err, took)
		}
		calls := f.count()
		for _, op := range []func() error{
			func() error { return errOf(s.Begin(ctx, "k", "a", time.Minute, false)) },
			func() error { return errOf(s.Get(ctx, "k")) },
		} {
			start := time.Now()
			if err := op(); !errors.Is(err, ledger.ErrUnavailable) || time.Since(start) != 0 {
				t.Fatalf("op while Redis is left alone = %v after %v; want ErrUnavailable at once", err, time.Since(start))
			}
		}
		if f.count() != calls {
			t.Fatalf("%d round trips while Redis was left alone; want none", f.count()-calls)
		}
		time.Sleep(time.Second) // ProbeEvery
		f.set("")
		if e, err := s.Begin(ctx, "k", "a", time.Minute, false); err != nil || e.State != ledger.Absent {
			t.Fatalf("Begin once Redis answers = %+v, %v; want Absent: the key unchanged", e, err)
		}
		if len(changes) != 2 || !errors.Is(changes[0], ledger.ErrUnavailable) || changes[1] != nil {
			t.Fatalf("OnError got %v; want one ErrUnavailable, then nil", changes)
		}
		out := logs.String()
		if strings.Count(out, "shared ledger unavailable, refusing side effects") != 1 ||
			strings.Count(out, "shared ledger available again") != 1 {
			t.Fatalf("log:\n%s\nwant one record of each change", out)
		}
	})
}

func errOf(_ ledger.Entry, err error) error { return err }

// A Finish the store does not take is kept in process and returns nil;
// Begin and Get on its key answer Done from memory meanwhile; once the
// store answers, the next operation writes it, and no operation waits
// longer than the Timeout.
func TestSharedPendingFinishIsWrittenOnceRedisIsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFake()
		s := newShared(t, f, ledger.SharedConfig{Timeout: 100 * time.Millisecond})
		for _, k := range []string{"k1", "k2", "k3"} {
			if _, err := s.Begin(ctx, k, "a", time.Minute, false); err != nil {
				t.Fatal(err)
			}
		}
		f.set("slow")
		cctx, cancel := context.WithCancel(ctx)
		cancel() // the caller gave up: the result is still kept
		start := time.Now()
		if err := s.Finish(cctx, "k1", "a", []byte("r1"), time.Hour); err != nil {
			t.Fatalf("Finish on a hanging store = %v; want nil, kept", err)
		}
		if took := time.Since(start); took != 100*time.Millisecond {
			t.Fatalf("Finish took %v; want the Timeout", took)
		}
		f.set("fail")
		start = time.Now()
		if err := s.Finish(ctx, "k2", "a", []byte("r2"), time.Hour); err != nil || time.Since(start) != 0 {
			t.Fatalf("Finish while Redis is left alone = %v after %v; want nil at once", err, time.Since(start))
		}
		if s.Pending() != 2 {
			t.Fatalf("Pending = %d; want 2", s.Pending())
		}
		for _, op := range []string{"Begin", "Get"} {
			var e ledger.Entry
			var err error
			if op == "Begin" {
				e, err = s.Begin(ctx, "k1", "b", time.Minute, true)
			} else {
				e, err = s.Get(ctx, "k2")
			}
			if err != nil || e.State != ledger.Done || e.Owner != "a" || !strings.HasPrefix(string(e.Result), "r") {
				t.Fatalf("%s of a pending key = %+v, %v; want Done from memory", op, e, err)
			}
		}
		if _, err := s.Begin(ctx, "k3", "b", time.Minute, false); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("Begin of another key while down = %v; want ErrUnavailable", err)
		}
		time.Sleep(time.Second)
		f.set("")
		if e, err := s.Get(ctx, "k3"); err != nil || e.State != ledger.Started {
			t.Fatalf("Get once back = %+v, %v", e, err)
		}
		if s.Pending() != 0 {
			t.Fatalf("Pending after Redis answered = %d; want 0", s.Pending())
		}
		for _, k := range []string{"k1", "k2"} {
			if e, err := f.Ledger.Get(ctx, k); err != nil || e.State != ledger.Done || string(e.Result) != "r"+k[1:] {
				t.Fatalf("the store holds %s as %+v, %v; want Done with its result", k, e, err)
			}
		}
	})
}

// MaxPending bounds what is kept: a Finish beyond it fails with
// ErrUnavailable. Flush writes what is kept, and a pending Finish whose
// key was taken over meanwhile is dropped with a Warn record.
func TestSharedPendingBoundedFlushAndTakenOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFake()
		var logs logBuffer
		s := newShared(t, f, ledger.SharedConfig{MaxPending: 2, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		for _, k := range []string{"k1", "k2", "k3"} {
			if _, err := s.Begin(ctx, k, "a", time.Minute, false); err != nil {
				t.Fatal(err)
			}
		}
		f.set("fail")
		for _, k := range []string{"k1", "k2"} {
			if err := s.Finish(ctx, k, "a", []byte("r"), time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Finish(ctx, "k3", "a", []byte("r"), time.Hour); !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("Finish beyond MaxPending = %v; want ErrUnavailable", err)
		}
		if err := s.Flush(ctx); !errors.Is(err, ledger.ErrUnavailable) || s.Pending() != 2 {
			t.Fatalf("Flush while failing = %v, pending %d; want ErrUnavailable, 2 kept", err, s.Pending())
		}
		time.Sleep(2 * time.Minute) // the leases end; another owner takes k2 over
		f.set("")
		if e, err := f.Ledger.Begin(ctx, "k2", "b", time.Minute, true); err != nil || !e.Expired(time.Now()) {
			t.Fatalf("takeover = %+v, %v", e, err)
		}
		if err := s.Flush(ctx); err != nil || s.Pending() != 0 {
			t.Fatalf("Flush = %v, pending %d; want nil, 0", err, s.Pending())
		}
		if e, _ := f.Ledger.Get(ctx, "k1"); e.State != ledger.Done {
			t.Fatalf("k1 = %+v; want Done", e)
		}
		if e, _ := f.Ledger.Get(ctx, "k2"); e.State != ledger.Started || e.Owner != "b" {
			t.Fatalf("k2 = %+v; want Started by b, the taker", e)
		}
		if out := logs.String(); strings.Count(out, "pending Finish was refused") != 1 || !strings.Contains(out, "key=k2") {
			t.Fatalf("log:\n%s\nwant one record of the refused pending Finish of k2", out)
		}
		if s.Available() {
			t.Fatal("Flush changed the health")
		}
	})
}

// A pending write that timed out after the store applied it is found
// done by its owner with its result on the next write: dropped silently.
// The caller's own context ending is returned as its error, and leaves
// the health alone; so does Available reporting false, at once.
func TestSharedCallerContextAndAvailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		f := newFake()
		var logs logBuffer
		down := false
		s := newShared(t, f, ledger.SharedConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Available: func() bool { return !down }})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Begin(cctx, "k", "a", time.Minute, false); !errors.Is(err, context.Canceled) || errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("Begin with an ended context = %v; want context.Canceled only", err)
		}
		dctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		defer cancel()
		f.set("slow")
		if _, err := s.Get(dctx, "k"); !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ledger.ErrUnavailable) || !s.Available() {
			t.Fatalf("Get past the caller's deadline = %v, available %v; want the caller's error, health untouched", err, s.Available())
		}
		f.set("")
		down = true
		calls := f.count()
		if _, err := s.Begin(ctx, "k", "a", time.Minute, false); !errors.Is(err, ledger.ErrUnavailable) || f.count() != calls {
			t.Fatalf("Begin while Available is false = %v (%d round trips); want ErrUnavailable, none", err, f.count()-calls)
		}
		down = false
		if _, err := s.Begin(ctx, "k", "a", time.Minute, false); err != nil {
			t.Fatal(err)
		}
		// The store applies the Finish but its answer is lost.
		if err := f.Ledger.Finish(ctx, "k", "a", []byte("r"), time.Hour); err != nil {
			t.Fatal(err)
		}
		f.set("fail")
		if err := s.Finish(ctx, "k", "a", []byte("r"), time.Hour); err != nil || s.Pending() != 1 {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		f.set("")
		if err := s.Flush(ctx); err != nil || s.Pending() != 0 || strings.Contains(logs.String(), "pending Finish was refused") {
			t.Fatalf("Flush = %v, pending %d, log:\n%s\nwant the pending write dropped silently", err, s.Pending(), logs.String())
		}
	})
}

package ledger_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/ledger"
)

// TestMemoryRecordsOnce: one Begin of many concurrent ones holds an
// absent key; the others find it Started; Finish makes it Done with its
// result, which every later Begin and Get find.
func TestMemoryRecordsOnce(t *testing.T) {
	ctx := context.Background()
	l := ledger.NewMemory()
	var won atomic.Int32
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			e, err := l.Begin(ctx, "conv-1/step-1/call-0", string(rune('a'+i%26)), time.Minute, false)
			if err != nil {
				t.Error(err)
			}
			if e.State == ledger.Absent {
				won.Add(1)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d Begins held the key; want 1", won.Load())
	}
	e, _ := l.Get(ctx, "conv-1/step-1/call-0")
	if e.State != ledger.Started {
		t.Fatalf("after the Begins: %v", e.State)
	}
	if err := l.Finish(ctx, "conv-1/step-1/call-0", "not-the-owner", []byte("x"), time.Hour); !errors.Is(err, ledger.ErrNotOwner) {
		t.Fatalf("Finish by another owner: %v", err)
	}
	if err := l.Finish(ctx, "conv-1/step-1/call-0", e.Owner, []byte(`{"refund":"r_1"}`), time.Hour); err != nil {
		t.Fatal(err)
	}
	e, _ = l.Begin(ctx, "conv-1/step-1/call-0", "z", time.Minute, true)
	if e.State != ledger.Done || string(e.Result) != `{"refund":"r_1"}` {
		t.Fatalf("Begin on a done key: %+v", e)
	}
}

// TestMemoryLeasesAndTakeover: a Started key whose lease ran out is
// outcome unknown (Expired); Begin without takeover leaves it, with
// takeover hands it to the new owner, and the old owner can no longer
// finish it.
func TestMemoryLeasesAndTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		l := ledger.NewMemory()
		if e, _ := l.Begin(ctx, "k", "a", time.Minute, false); e.State != ledger.Absent {
			t.Fatalf("first Begin: %+v", e)
		}
		e, _ := l.Begin(ctx, "k", "b", time.Minute, true)
		if e.State != ledger.Started || e.Owner != "a" || e.Expired(time.Now()) {
			t.Fatalf("Begin within the lease: %+v", e)
		}
		time.Sleep(time.Minute)
		e, _ = l.Begin(ctx, "k", "b", time.Minute, false)
		if !e.Expired(time.Now()) || e.Owner != "a" {
			t.Fatalf("Begin past the lease without takeover: %+v", e)
		}
		if e, _ = l.Begin(ctx, "k", "b", time.Minute, true); !e.Expired(time.Now()) || e.Owner != "a" {
			t.Fatalf("takeover: was %+v", e)
		}
		if err := l.Finish(ctx, "k", "a", nil, 0); !errors.Is(err, ledger.ErrNotOwner) {
			t.Fatalf("the old owner finished a key taken over: %v", err)
		}
		if err := l.Finish(ctx, "k", "b", []byte("ok"), time.Hour); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Hour)
		if e, _ := l.Get(ctx, "k"); e.State != ledger.Absent {
			t.Fatalf("a done key past its ttl: %+v", e)
		}
	})
}

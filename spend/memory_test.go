package spend_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/spend"
)

func TestMemoryReservesWithinTheLimitOnly(t *testing.T) {
	ctx := context.Background()
	s := spend.NewMemory()
	if ok, used, err := s.Reserve(ctx, "a", 0, 60, 100, time.Hour); !ok || used != 60 || err != nil {
		t.Fatalf("first reservation: %v %v %v", ok, used, err)
	}
	if ok, used, _ := s.Reserve(ctx, "a", 0, 41, 100, time.Hour); ok || used != 60 {
		t.Fatalf("a reservation past the limit: ok %v, used %v; want refused, 60 used", ok, used)
	}
	if ok, used, _ := s.Reserve(ctx, "a", 0, 40, 100, time.Hour); !ok || used != 100 {
		t.Fatalf("a reservation up to the limit: ok %v, used %v", ok, used)
	}
	if ok, _, _ := s.Reserve(ctx, "b", 0, 100, 100, time.Hour); !ok {
		t.Fatal("another key shares a's limit")
	}
	if ok, _, _ := s.Reserve(ctx, "a", 1, 100, 100, time.Hour); !ok {
		t.Fatal("another period shares a's limit")
	}
	if err := s.Settle(ctx, "a", 0, 60, 75, time.Hour); err != nil {
		t.Fatal(err)
	}
	if spent, reserved, _ := s.Used(ctx, "a", 0); spent != 75 || reserved != 40 {
		t.Fatalf("after settling 60 reserved as 75 spent: spent %v, reserved %v", spent, reserved)
	}
	if ok, _, _ := s.Reserve(ctx, "a", 0, cost.Money(1<<62), 1<<62, time.Hour); ok {
		t.Fatal("a huge reservation on top of 115 fits a limit it passes")
	}
}

// TestMemoryForgetsPeriodsPastTheirTTL: a period is kept ttl after its last
// change, then forgotten (reads as nothing, and is dropped from the map
// once the store sweeps).
func TestMemoryForgetsPeriodsPastTheirTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s := spend.NewMemory()
		s.Reserve(ctx, "a", 0, 10, 100, time.Hour)
		time.Sleep(59 * time.Minute)
		s.Settle(ctx, "a", 0, 10, 7, time.Hour) // renews it
		time.Sleep(59 * time.Minute)
		if spent, reserved, _ := s.Used(ctx, "a", 0); spent != 7 || reserved != 0 {
			t.Fatalf("within ttl of its last change: %v %v", spent, reserved)
		}
		time.Sleep(2 * time.Minute)
		if spent, reserved, _ := s.Used(ctx, "a", 0); spent != 0 || reserved != 0 {
			t.Fatalf("past ttl: %v %v; want forgotten", spent, reserved)
		}
		if ok, used, _ := s.Reserve(ctx, "a", 0, 100, 100, time.Hour); !ok || used != 100 {
			t.Fatalf("a forgotten period starts afresh: %v %v", ok, used)
		}
	})
}

// TestMemoryUnderConcurrency: many goroutines reserving and settling on
// the same key never pass the limit with their reservations, and the
// reservations all come back (run with -race).
func TestMemoryUnderConcurrency(t *testing.T) {
	ctx := context.Background()
	s := spend.NewMemory()
	const limit, each = 1000, 7
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 200 {
		wg.Go(func() {
			for range 50 {
				ok, used, err := s.Reserve(ctx, "k", 0, each, limit, time.Hour)
				if err != nil || used > limit {
					t.Errorf("Reserve: %v, used %v past %v", err, used, limit)
				}
				if ok {
					mu.Lock()
					granted++
					mu.Unlock()
					s.Settle(ctx, "k", 0, each, 1, time.Hour) // each costs 1 of its 7
				}
			}
		})
	}
	wg.Wait()
	spent, reserved, _ := s.Used(ctx, "k", 0)
	if reserved != 0 || spent != cost.Money(granted) || spent > limit {
		t.Fatalf("spent %v reserved %v after %d granted; want every reservation back, spent = granted ≤ %d", spent, reserved, granted, limit)
	}
	if spent < limit-each {
		t.Errorf("spent %v: the key stopped short of its limit %v by more than one reservation", spent, limit)
	}
}

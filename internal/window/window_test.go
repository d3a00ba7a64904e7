package window

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestCountsAgeOutBucketByBucket(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := New(10*time.Second, time.Second)
		for i := range 10 {
			w.Add(0)
			if i%2 == 0 {
				w.Add(1)
			}
			time.Sleep(time.Second)
		}
		// t=10s: the bucket of t=0 has aged out.
		if a, b := w.Sums(); a != 9 || b != 4 {
			t.Fatalf("sums %d %d, want 9 4", a, b)
		}
		time.Sleep(5 * time.Second)
		if a, b := w.Sums(); a != 4 || b != 2 {
			t.Fatalf("sums %d %d, want 4 2", a, b)
		}
		time.Sleep(time.Hour)
		if a, b := w.Sums(); a != 0 || b != 0 {
			t.Fatalf("sums after an hour %d %d", a, b)
		}
		w.Add(1)
		if a, b := w.Sums(); a != 0 || b != 1 {
			t.Fatalf("reused bucket %d %d", a, b)
		}
	})
}

func TestConcurrentAdds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := New(30*time.Second, 3*time.Second)
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				for range 100 {
					w.Add(0)
				}
			})
		}
		wg.Wait()
		if a, _ := w.Sums(); a != 10000 {
			t.Fatalf("counted %d of 10000", a)
		}
	})
}

func TestAddAllocatesNothing(t *testing.T) {
	w := New(time.Minute, time.Second)
	if n := testing.AllocsPerRun(1000, func() { w.Add(0) }); n != 0 {
		t.Fatalf("%v allocations per Add", n)
	}
}

func BenchmarkAdd(b *testing.B) {
	w := New(30*time.Second, 3*time.Second)
	b.ReportAllocs()
	for b.Loop() {
		w.Add(0)
	}
}

func TestAddNAtSumsAmounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := New(10*time.Second, time.Second)
		w.AddNAt(0, 500, time.Now())
		w.AddNAt(0, 250, time.Now())
		if a, _ := w.Sums(); a != 750 {
			t.Fatalf("sum %d, want 750", a)
		}
		time.Sleep(11 * time.Second)
		if a, _ := w.Sums(); a != 0 {
			t.Fatalf("sum after the window %d, want 0", a)
		}
	})
}

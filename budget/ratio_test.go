package budget

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// defaultRatio is NewRatio(RatioConfig{}), which never fails.
func newDefaultRatio() *Ratio {
	r, err := NewRatio(RatioConfig{})
	if err != nil {
		panic(err)
	}
	return r
}

func TestRatioDefaults(t *testing.T) {
	want := RatioConfig{Ratio: 0.1, Window: 10 * time.Second, MinRetries: 10}
	if got := (RatioConfig{}).withDefaults(); got != want {
		t.Fatalf("defaults = %+v, want %+v", got, want)
	}
	if got := want.withDefaults(); got != want {
		t.Fatalf("WithDefaults is not idempotent: %+v", got)
	}
	r := mustNew(t, NewRatio, RatioConfig{})
	if r.settings() != want || newDefaultRatio().settings() != want {
		t.Fatalf("Config = %+v, want %+v", r.settings(), want)
	}
	if r.width != int64(time.Second) || r.ratio != 100_000 || r.minRetries != 10 {
		t.Fatalf("internal: width %d, ratio %d ppm, floor %d", r.width, r.ratio, r.minRetries)
	}
	if c := (RatioConfig{Ratio: 0.2}).withDefaults(); c.Window != defaultWindow || c.MinRetries != defaultMinRetries || c.Ratio != 0.2 {
		t.Fatalf("a set field must be kept and the others defaulted: %+v", c)
	}
	if c := (RatioConfig{MinRetries: -1}).withDefaults(); c.MinRetries != -1 {
		t.Fatalf("a negative MinRetries (no floor) must be kept: %+v", c)
	}
}

func TestRatioValidate(t *testing.T) {
	for _, c := range []RatioConfig{{}, {Ratio: 1}, {Ratio: 1e-9}, {Window: minWindow}, {Window: time.Hour}, {MinRetries: -1}, {MinRetries: 1000}} {
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
	cases := []struct {
		c     RatioConfig
		field string
		hint  string
	}{
		{RatioConfig{Ratio: -0.1}, "Ratio", "0 for the default"},
		{RatioConfig{Ratio: math.NaN()}, "Ratio", "fraction in (0, 1]"},
		{RatioConfig{Ratio: math.Inf(1)}, "Ratio", "fraction in (0, 1]"},
		{RatioConfig{Ratio: 1.5}, "Ratio", "Unlimited()"},
		{RatioConfig{Window: -time.Second}, "Window", "must not be negative"},
		{RatioConfig{Window: 9 * time.Millisecond}, "Window", "at least 10ms"},
		{RatioConfig{Window: 1}, "Window", "at least 10ms"},
	}
	for _, tc := range cases {
		refused(t, NewRatio, tc.c, tc.field+" is", tc.hint)
	}
	err := RatioConfig{Ratio: 2, Window: -1}.Validate()
	if !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), "Ratio") || !strings.Contains(err.Error(), "Window") {
		t.Fatalf("every problem must be reported at once: %v", err)
	}
}

func TestRatioTenPercent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		r := newDefaultRatio()
		for range 1000 {
			r.Record(ctx, Outcome{})
		}
		if got := r.remaining(); got != 100 {
			t.Fatalf("Remaining = %d, want 100", got)
		}
		for i := range 100 {
			if err := r.Withdraw(ctx); err != nil {
				t.Fatalf("retry %d refused: %v", i+1, err)
			}
			r.Record(ctx, Outcome{Retry: true}) // counted by Withdraw, not here
		}
		if err := r.Withdraw(ctx); !errors.Is(err, ErrExhausted) {
			t.Fatalf("retry 101: want ErrExhausted, got %v", err)
		}
		if f, rt := r.counts(); f != 1000 || rt != 100 {
			t.Fatalf("Counts = (%d, %d), want (1000, 100)", f, rt)
		}
		if r.remaining() != 0 {
			t.Fatalf("Remaining = %d, want 0", r.remaining())
		}
		// Ten more first attempts earn exactly one more retry.
		for range 10 {
			r.Record(ctx, Outcome{Success: true})
		}
		if drain(r) != 1 {
			t.Fatal("10 more first attempts must earn exactly one retry")
		}
	})
}

func TestRatioExactForDecimalRatios(t *testing.T) {
	// 0.29 * 100 is 28.999999999999996 in float64; the budget keeps ratios
	// in millionths so that it is 29.
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, NewRatio, RatioConfig{Ratio: 0.29, MinRetries: -1})
		for range 100 {
			r.Record(context.Background(), Outcome{})
		}
		if got := drain(r); got != 29 {
			t.Fatalf("granted %d, want 29", got)
		}
	})
}

func TestRatioFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		if got := drain(newDefaultRatio()); got != defaultMinRetries {
			t.Fatalf("no traffic: granted %d, want MinRetries %d", got, defaultMinRetries)
		}
		r := mustNew(t, NewRatio, RatioConfig{MinRetries: 3})
		if got := drain(r); got != 3 {
			t.Fatalf("no traffic, MinRetries 3: granted %d", got)
		}
		// Below 1/Ratio first attempts, only the floor counts.
		for range 29 {
			r.Record(context.Background(), Outcome{})
		}
		if got := drain(r); got != 0 {
			t.Fatalf("29 first attempts at 10%% (2) are under the floor of 3: granted %d more", got)
		}
		// No floor: nothing until ten first attempts were seen.
		none := mustNew(t, NewRatio, RatioConfig{MinRetries: -1})
		if none.Withdraw(context.Background()) == nil {
			t.Fatal("no floor and no traffic: a retry was granted")
		}
		for range 10 {
			none.Record(context.Background(), Outcome{})
		}
		if got := drain(none); got != 1 {
			t.Fatalf("no floor, 10 first attempts: granted %d, want 1", got)
		}
	})
}

func TestRatioWindowRolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newDefaultRatio()
		if got := drain(r); got != 10 {
			t.Fatalf("first window: granted %d, want 10", got)
		}
		time.Sleep(defaultWindow - time.Nanosecond)
		if err := r.Withdraw(context.Background()); !errors.Is(err, ErrExhausted) {
			t.Fatalf("just before the window passed: %v, want ErrExhausted", err)
		}
		time.Sleep(time.Nanosecond)
		if _, rt := r.counts(); rt != 0 {
			t.Fatalf("after a window the retries must have aged out: %d", rt)
		}
		if got := drain(r); got != 10 {
			t.Fatalf("second window: granted %d, want 10", got)
		}
		time.Sleep(time.Hour) // many windows at once: the ring is not walked
		if f, rt := r.counts(); f != 0 || rt != 0 {
			t.Fatalf("after an idle hour: Counts = (%d, %d)", f, rt)
		}
		if got := drain(r); got != 10 {
			t.Fatalf("after an idle hour: granted %d, want 10", got)
		}
	})
}

// Old buckets expire one by one: a count stays in the window while its
// bucket is one of the last ten, so between 9 and 10 seconds by default.
func TestRatioPartialRoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		r := mustNew(t, NewRatio, RatioConfig{MinRetries: -1})
		for range 100 {
			r.Record(ctx, Outcome{}) // bucket 0
		}
		time.Sleep(5 * time.Second)
		for range 50 {
			r.Record(ctx, Outcome{}) // bucket 5
		}
		time.Sleep(4*time.Second + 999*time.Millisecond) // t = 9.999s, bucket 9
		if f, _ := r.counts(); f != 150 {
			t.Fatalf("t=9.999s: firsts %d, want 150", f)
		}
		if got := drain(r); got != 15 {
			t.Fatalf("t=9.999s: granted %d, want 15", got)
		}
		time.Sleep(time.Millisecond) // t = 10s: bucket 0 expires
		if f, rt := r.counts(); f != 50 || rt != 15 {
			t.Fatalf("t=10s: Counts = (%d, %d), want (50, 15)", f, rt)
		}
		if r.Withdraw(ctx) == nil {
			t.Fatal("t=10s: 15 retries against an allowance of 5 must be refused")
		}
		time.Sleep(5 * time.Second) // t = 15s: bucket 5 expires
		if f, rt := r.counts(); f != 0 || rt != 15 {
			t.Fatalf("t=15s: Counts = (%d, %d), want (0, 15)", f, rt)
		}
		time.Sleep(4 * time.Second) // t = 19s: bucket 9 expires
		if f, rt := r.counts(); f != 0 || rt != 0 {
			t.Fatalf("t=19s: Counts = (%d, %d), want (0, 0)", f, rt)
		}
	})
}

func TestRatioRetriesAgeOutOneByOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newDefaultRatio()
		for s := range 10 { // one retry in each of the ten buckets
			if err := r.Withdraw(context.Background()); err != nil {
				t.Fatalf("t=%ds: %v", s, err)
			}
			time.Sleep(time.Second)
		}
		for k := range 10 { // now t = 10s + k
			if _, rt := r.counts(); rt != int64(9-k) {
				t.Fatalf("t=%ds: %d retries in the window, want %d", 10+k, rt, 9-k)
			}
			if got := r.remaining(); got != int64(k+1) {
				t.Fatalf("t=%ds: Remaining %d, want %d", 10+k, got, k+1)
			}
			time.Sleep(time.Second)
		}
	})
}

func TestRatioShortWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, NewRatio, RatioConfig{Window: minWindow, MinRetries: 2})
		for range 5 {
			if got := drain(r); got != 2 {
				t.Fatalf("granted %d, want 2", got)
			}
			time.Sleep(minWindow)
		}
	})
}

func TestRatioRecordCountsFirstAttemptsOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		r := newDefaultRatio()
		for _, o := range []Outcome{{}, {Success: true}, {Retry: true}, {Retry: true, Success: true}} {
			r.Record(ctx, o)
		}
		if f, rt := r.counts(); f != 2 || rt != 0 {
			t.Fatalf("Counts = (%d, %d), want (2, 0): retries are counted by Withdraw", f, rt)
		}
	})
}

// 10,000 goroutines recording and withdrawing at once lose no count and
// never let the retries exceed the allowance.
func TestRatioConcurrentCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		r := mustNew(t, NewRatio, RatioConfig{MinRetries: -1})
		const n = 10_000
		var wg sync.WaitGroup
		var granted, refused int64
		var mu sync.Mutex
		for i := range n {
			wg.Go(func() {
				r.Record(ctx, Outcome{Success: i%2 == 0})
				err := r.Withdraw(ctx)
				mu.Lock()
				if err == nil {
					granted++
				} else {
					refused++
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if f, rt := r.counts(); f != n || rt != granted {
			t.Fatalf("Counts = (%d, %d), want (%d, %d)", f, rt, n, granted)
		}
		if granted > n/10 || granted+refused != n {
			t.Fatalf("granted %d, refused %d", granted, refused)
		}
		t.Logf("%d goroutines: %d retries granted (allowance at the end %d)", n, granted, n/10)
	})
}

// A withdrawal whose clock read is behind another's (they straddle a bucket
// boundary) still sees the other's reservation in the newer bucket, so the
// two cannot both pass on one remaining retry.
func TestRatioStaleClockSeesNewerBuckets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := mustNew(t, NewRatio, RatioConfig{MinRetries: 1})
		if err := r.withdraw(10); err != nil { // bucket 0 now counts epoch 10
			t.Fatal(err)
		}
		if err := r.withdraw(9); !errors.Is(err, ErrExhausted) {
			t.Fatalf("a withdrawal at epoch 9 must see the retry granted at epoch 10: %v", err)
		}
		// A clock a whole ring behind lands in the newer bucket: it is not
		// lost, and it does not reset that bucket.
		if err := r.withdraw(0); !errors.Is(err, ErrExhausted) {
			t.Fatalf("epoch 0 after epoch 10: %v", err)
		}
		r.bucket(0).firsts.Add(1)
		if got := r.buckets[0].epoch.Load(); got != 10 {
			t.Fatalf("a stale clock moved bucket 0 back to epoch %d", got)
		}
		if got := r.buckets[0].firsts.Load(); got != 1 {
			t.Fatalf("bucket 0 counts %d first attempts, want 1", got)
		}
	})
}

// Real time and a 10ms window: buckets roll under 8 goroutines recording
// and withdrawing. There is no timing assertion; the race detector and the
// counters' consistency are what is checked.
func TestRatioRollsUnderLoad(t *testing.T) {
	ctx := context.Background()
	r := mustNew(t, NewRatio, RatioConfig{Window: minWindow, MinRetries: 2})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 20_000 {
				r.Record(ctx, Outcome{Retry: i%3 == 0})
				_ = r.Withdraw(ctx)
				if f, rt := r.counts(); f < 0 || rt < 0 {
					panic("negative counts")
				}
			}
		})
	}
	wg.Wait()
	for i := range r.buckets {
		b := &r.buckets[i]
		if e := b.epoch.Load(); e%bucketCount != int64(i) && e >= 0 {
			t.Errorf("bucket %d holds epoch %d", i, e)
		}
		if b.firsts.Load() < 0 || b.retries.Load() < 0 {
			t.Errorf("bucket %d: negative counters (%d, %d)", i, b.firsts.Load(), b.retries.Load())
		}
	}
}

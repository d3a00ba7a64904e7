package budget

import (
	"context"
	"testing"
	"time"
)

// benchRatio returns a ratio budget whose window does not roll during a
// benchmark; with plenty set, every Withdraw is granted, otherwise every
// Withdraw is refused.
func benchRatio(b *testing.B, plenty bool) *Ratio {
	b.Helper()
	c := RatioConfig{Window: 24 * time.Hour, MinRetries: -1}
	if plenty {
		c.Ratio = 1
	}
	r, err := NewRatio(c)
	if err != nil {
		b.Fatal(err)
	}
	if plenty {
		r.bucket(r.now()).firsts.Add(1 << 50)
	}
	return r
}

func BenchmarkRatioRecord(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		r := benchRatio(b, false)
		b.ReportAllocs()
		for b.Loop() {
			r.Record(ctx, Outcome{Success: true})
		}
	})
	b.Run("parallel", func(b *testing.B) {
		r := benchRatio(b, false)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				r.Record(ctx, Outcome{Success: true})
			}
		})
	})
}

func BenchmarkRatioWithdraw(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		granted bool
	}{{"granted", true}, {"refused", false}} {
		b.Run(tc.name+"/serial", func(b *testing.B) {
			r := benchRatio(b, tc.granted)
			b.ReportAllocs()
			for b.Loop() {
				if (r.Withdraw(ctx) == nil) != tc.granted {
					b.Fatal("unexpected outcome")
				}
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			r := benchRatio(b, tc.granted)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if (r.Withdraw(ctx) == nil) != tc.granted {
						panic("unexpected outcome")
					}
				}
			})
		})
	}
}

func benchBucket(b *testing.B, plenty bool) *TokenBucket {
	b.Helper()
	c := TokenBucketConfig{Capacity: MaxCapacity, Cost: 0.001}
	if !plenty {
		c = TokenBucketConfig{Capacity: 1, Cost: 1}
	}
	tb, err := NewTokenBucket(c)
	if err != nil {
		b.Fatal(err)
	}
	if !plenty {
		_ = tb.Withdraw(context.Background())
	}
	return tb
}

// BenchmarkTokenBucketRecord measures the healthy path: a success recorded
// on a full bucket.
func BenchmarkTokenBucketRecord(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		tb := benchBucket(b, true)
		b.ReportAllocs()
		for b.Loop() {
			tb.Record(ctx, Outcome{Success: true})
		}
	})
	b.Run("parallel", func(b *testing.B) {
		tb := benchBucket(b, true)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tb.Record(ctx, Outcome{Success: true})
			}
		})
	})
}

// BenchmarkTokenBucketRefund measures a success recorded on a bucket that is
// not full: a compare-and-swap.
func BenchmarkTokenBucketRefund(b *testing.B) {
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		tb := benchBucket(b, false)
		b.ReportAllocs()
		for b.Loop() {
			tb.tokens.Store(0)
			tb.Record(ctx, Outcome{Success: true})
		}
	})
}

func BenchmarkTokenBucketWithdraw(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		granted bool
	}{{"granted", true}, {"refused", false}} {
		b.Run(tc.name+"/serial", func(b *testing.B) {
			tb := benchBucket(b, tc.granted)
			b.ReportAllocs()
			for b.Loop() {
				if (tb.Withdraw(ctx) == nil) != tc.granted {
					b.Fatal("unexpected outcome")
				}
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			tb := benchBucket(b, tc.granted)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if (tb.Withdraw(ctx) == nil) != tc.granted {
						panic("unexpected outcome")
					}
				}
			})
		})
	}
}

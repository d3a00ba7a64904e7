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
	r := mustNew(b, NewRatio, c)
	if plenty {
		r.bucket(r.now()).firsts.Add(1 << 50)
	}
	return r
}

// budgeter is what the benchmarks call of a budget.
type budgeter interface {
	Withdraw(ctx context.Context) error
	Record(ctx context.Context, o Outcome)
}

// serialAndParallel runs op on a budget made by mk as the sub-benchmarks
// prefix+"serial" and prefix+"parallel"; op reports an unexpected outcome
// with false.
func serialAndParallel[T budgeter](b *testing.B, prefix string, mk func(*testing.B) T, op func(T) bool) {
	b.Run(prefix+"serial", func(b *testing.B) {
		bud := mk(b)
		b.ReportAllocs()
		for b.Loop() {
			if !op(bud) {
				b.Fatal("unexpected outcome")
			}
		}
	})
	b.Run(prefix+"parallel", func(b *testing.B) {
		bud := mk(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if !op(bud) {
					panic("unexpected outcome")
				}
			}
		})
	})
}

// benchRecord measures a success recorded on a budget made by mk(b, plenty).
func benchRecord[T budgeter](b *testing.B, mk func(*testing.B, bool) T, plenty bool) {
	ctx := context.Background()
	serialAndParallel(b, "", func(b *testing.B) T { return mk(b, plenty) }, func(bud T) bool {
		bud.Record(ctx, Outcome{Success: true})
		return true
	})
}

// benchWithdraw measures Withdraw granted (on mk(b, true)) and refused (on
// mk(b, false)).
func benchWithdraw[T budgeter](b *testing.B, mk func(*testing.B, bool) T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		granted bool
	}{{"granted", true}, {"refused", false}} {
		serialAndParallel(b, tc.name+"/", func(b *testing.B) T { return mk(b, tc.granted) }, func(bud T) bool {
			return (bud.Withdraw(ctx) == nil) == tc.granted
		})
	}
}

func BenchmarkRatioRecord(b *testing.B) { benchRecord(b, benchRatio, false) }

func BenchmarkRatioWithdraw(b *testing.B) { benchWithdraw(b, benchRatio) }

func benchBucket(b *testing.B, plenty bool) *TokenBucket {
	b.Helper()
	c := TokenBucketConfig{Capacity: maxCapacity, Cost: 0.001}
	if !plenty {
		c = TokenBucketConfig{Capacity: 1, Cost: 1}
	}
	tb := mustNew(b, NewTokenBucket, c)
	if !plenty {
		_ = tb.Withdraw(context.Background())
	}
	return tb
}

// BenchmarkTokenBucketRecord measures the healthy path: a success recorded
// on a full bucket.
func BenchmarkTokenBucketRecord(b *testing.B) { benchRecord(b, benchBucket, true) }

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

func BenchmarkTokenBucketWithdraw(b *testing.B) { benchWithdraw(b, benchBucket) }

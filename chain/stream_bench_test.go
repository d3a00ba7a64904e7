package chain_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/backstop-llm/backstop/chain"
)

// chunkCounts are the stream lengths the stream benchmarks compare: the
// cost per answer byte must not grow with them.
var chunkCounts = []int{1000, 10000, 100000}

// perByte runs op (one whole stream of size answer bytes) under b.Loop and
// reports, besides ns/op and B/op, the bytes allocated and the time spent
// per answer byte.
func perByte(b *testing.B, size int, op func()) {
	b.ReportAllocs()
	b.SetBytes(int64(size))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	n := 0
	for b.Loop() {
		op()
		n++
	}
	runtime.ReadMemStats(&after)
	bytes := float64(n) * float64(size)
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/bytes, "allocB/byte")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/bytes, "ns/byte")
}

// BenchmarkStreamTinyDeltas streams answers of 1,000 to 100,000 chunks of
// 4 bytes through a chain with one in-process target: the chain's cost per
// byte must be flat in the number of chunks.
func BenchmarkStreamTinyDeltas(b *testing.B) {
	for _, n := range chunkCounts {
		b.Run(fmt.Sprintf("chunks=%d", n), func(b *testing.B) {
			p := newTinyDeltas(n)
			c, err := chain.New("bench").Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			perByte(b, len(p.answer), func() {
				s := c.Stream(ctx, question)
				for _, err := range s.Chunks() {
					if err != nil {
						b.Fatal(err)
					}
				}
				if res, err := s.Result(); err != nil || len(res.Text) != len(p.answer) {
					b.Fatalf("%d bytes, %v", len(res.Text), err)
				}
			})
		})
	}
}

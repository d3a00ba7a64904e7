package bench

import (
	"os"
	"testing"
)

// ballast is live heap standing in for a service's own data: with it the
// collector runs as often as it would in a service (every 64 MiB or so of
// allocation) rather than every 4 MiB, as it does in a bare benchmark
// binary. BENCH_BALLAST_MB=0 measures without it.
var ballast [][]byte

func TestMain(m *testing.M) {
	mb := 64
	if v := os.Getenv("BENCH_BALLAST_MB"); v != "" {
		mb = 0
		for _, c := range v {
			mb = mb*10 + int(c-'0')
		}
	}
	for range mb {
		ballast = append(ballast, make([]byte, 1<<20))
	}
	code := m.Run()
	ballast = nil
	os.Exit(code)
}

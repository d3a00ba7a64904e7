package agent_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/redisstore"
)

// TestExactlyOnceOverRedis runs 1,000 refund conversations over two
// replicas, each with its own Redis client and ledger.Shared on one real
// Redis ledger, 50 at a time, in real time, with faults at every step
// boundary (see runFaults): one refund per key, or an outcome unknown
// that Recover answers by finding that one refund; never two.
//
// In real time (Redis I/O is not durably blocking: no synctest), so the
// refund's Timeout is 200ms and its Lease 700ms rather than the default 2
// × Timeout + 10 s: a killed replica's call is recovered about 750ms
// later (the Lease, read at the duplicate's poll), not 10 s, and the test
// takes about 5 s on two cores. The Lease still outlives the longest a
// live call holds its key (a timed-out Run, Recover, a Finish round trip:
// about 200ms) by far.
func TestExactlyOnceOverRedis(t *testing.T) {
	name := redistest.Prefix(t) + "ledger"
	var downs atomic.Int64
	var ledgers [2]ledger.Ledger
	var final ledger.Ledger
	for i := range ledgers {
		store, err := redisstore.New(redistest.Client(t))
		if err != nil {
			t.Fatal(err)
		}
		final = store.Ledger(name)
		// A Timeout of 5s rather than 250ms: this test counts side
		// effects, not outages (ledger's tests do), and a round trip
		// queued behind 50 conversations on a loaded machine is not one.
		ledgers[i], err = ledger.NewShared(store.Ledger(name), ledger.SharedConfig{Timeout: 5 * time.Second,
			OnError: func(err error) {
				if err != nil {
					downs.Add(1)
					t.Errorf("the shared ledger was unavailable: %v", err)
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	runFaults(t, faultRig{conversations: 1000, parallel: 50, seed: 27, ledgers: ledgers, final: final,
		timeout: 200 * time.Millisecond, lease: 700 * time.Millisecond, patience: 10 * time.Second})
	t.Logf("wall time %v; the shared ledger unavailable %d times", time.Since(start).Round(time.Millisecond), downs.Load())
	for i, l := range ledgers {
		if n := l.(*ledger.Shared).Pending(); n != 0 {
			t.Errorf("replica %d keeps %d Finishes that Redis did not take", i, n)
		}
	}
}

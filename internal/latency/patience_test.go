package latency_test

import (
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/latency"
)

// TestPatience: a patience that is set is the patience; one that is not
// is the floor (30 s for an answer, 10 s for a first chunk) until the
// window holds MinSamples, then twice its p99 when that is longer.
func TestPatience(t *testing.T) {
	var w latency.Window
	if p := latency.Patience(time.Minute, &w, false); p != time.Minute {
		t.Fatalf("set to a minute: %v", p)
	}
	for range latency.MinSamples - 1 {
		w.Add(25 * time.Second)
	}
	if a, s := latency.Patience(0, &w, false), latency.Patience(0, &w, true); a != 30*time.Second || s != 10*time.Second {
		t.Fatalf("with %d samples: %v for an answer, %v for a first chunk; want the floors 30s and 10s", w.Len(), a, s)
	}
	w.Add(25 * time.Second)
	if p := latency.Patience(0, &w, false); p != 50*time.Second {
		t.Fatalf("answers of 25s: %v; want twice their p99, 50s", p)
	}
	var fast latency.Window
	for range latency.MinSamples {
		fast.Add(time.Second)
	}
	if a, s := latency.Patience(0, &fast, false), latency.Patience(0, &fast, true); a != 30*time.Second || s != 10*time.Second {
		t.Fatalf("answers of 1s: %v, %v; want the floors, longer than twice the p99", a, s)
	}
	if p := latency.Patience(3*time.Second, &fast, true); p != 3*time.Second {
		t.Fatalf("set below the floor: %v; want it as set", p)
	}
}

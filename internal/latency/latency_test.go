package latency_test

import (
	"testing"
	"time"

	"github.com/backstop-llm/backstop/internal/latency"
)

func TestDelayDefaults(t *testing.T) {
	var w latency.Window
	for range latency.MinSamples {
		w.Add(time.Millisecond)
	}
	if d, ok := latency.Delay(0, true, 0, &w); !ok || d != latency.DefaultMinDelay {
		t.Fatalf("adaptive with no floor: %v %v; want %v", d, ok, latency.DefaultMinDelay)
	}
	if d, ok := latency.Delay(time.Second, false, 0, nil); !ok || d != time.Second {
		t.Fatalf("fixed: %v %v", d, ok)
	}
	if _, ok := latency.Delay(0, false, 0, nil); ok {
		t.Fatal("a zero fixed delay hedges")
	}
}

func TestAdaptiveDelayIsTheQuantileOnceThereAreEnoughAnswers(t *testing.T) {
	delay := func(w *latency.Window) (time.Duration, bool) { return latency.Delay(10*time.Millisecond, true, 0.9, w) }
	var w latency.Window
	for i := range latency.MinSamples - 1 {
		w.Add(time.Duration(i+1) * 100 * time.Millisecond)
	}
	if _, ok := delay(&w); ok {
		t.Fatal("a delay from fewer than MinSamples answers")
	}
	w.Add(2 * time.Second) // 20 samples: 100ms .. 1.9s, 2s
	if d, ok := delay(&w); !ok || d != 1800*time.Millisecond {
		t.Fatalf("p90 of 20 = %v %v; want the 18th, 1.8s", d, ok)
	}
	// The floor: answers faster than Delay.
	var fast latency.Window
	for range 100 {
		fast.Add(time.Millisecond)
	}
	if d, _ := delay(&fast); d != 10*time.Millisecond {
		t.Fatalf("floor: %v", d)
	}
}

func TestWindowKeepsTheLatestAnswers(t *testing.T) {
	var w latency.Window
	for range latency.WindowSize {
		w.Add(time.Hour)
	}
	for range latency.WindowSize {
		w.Add(time.Second)
	}
	if q, ok := w.Quantile(0.99); !ok || q != time.Second || w.Len() != latency.WindowSize {
		t.Fatalf("%v %v %d; the old hour should be gone", q, ok, w.Len())
	}
}

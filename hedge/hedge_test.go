package hedge_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/llm"
)

func TestConfigOnAndDefaults(t *testing.T) {
	if (hedge.Config{}).On() {
		t.Fatal("the zero Config is on")
	}
	c := hedge.Config{Adaptive: true}.WithDefaults()
	if !c.On() || c.Delay != hedge.DefaultMinDelay || c.Quantile != hedge.DefaultQuantile {
		t.Fatalf("%+v", c)
	}
	if d, ok := (hedge.Config{Delay: time.Second}).WithDefaults().DelayFrom(nil); !ok || d != time.Second {
		t.Fatalf("fixed: %v %v", d, ok)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		c    hedge.Config
		says string
	}{
		{hedge.Config{Delay: -1}, "Delay is -1ns"},
		{hedge.Config{Adaptive: true, Quantile: 1}, "Quantile is 1"},
		{hedge.Config{Delay: time.Second, Quantile: 0.9}, "Adaptive is not"},
	} {
		err := tc.c.Validate()
		if !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: %v; want it to say %q", tc.c, err, tc.says)
		}
	}
	if err := (hedge.Config{Adaptive: true, Quantile: 0.9, Delay: time.Millisecond}).Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestAdaptiveDelayIsTheQuantileOnceThereAreEnoughAnswers(t *testing.T) {
	c := hedge.Config{Adaptive: true, Quantile: 0.9, Delay: 10 * time.Millisecond}.WithDefaults()
	var w hedge.Window
	for i := range hedge.MinSamples - 1 {
		w.Add(time.Duration(i+1) * 100 * time.Millisecond)
	}
	if _, ok := c.DelayFrom(&w); ok {
		t.Fatal("a delay from fewer than MinSamples answers")
	}
	w.Add(2 * time.Second) // 20 samples: 100ms .. 1.9s, 2s
	if d, ok := c.DelayFrom(&w); !ok || d != 1800*time.Millisecond {
		t.Fatalf("p90 of 20 = %v %v; want the 18th, 1.8s", d, ok)
	}
	// The floor: answers faster than Delay.
	var fast hedge.Window
	for range 100 {
		fast.Add(time.Millisecond)
	}
	if d, _ := c.DelayFrom(&fast); d != 10*time.Millisecond {
		t.Fatalf("floor: %v", d)
	}
}

func TestWindowKeepsTheLatestAnswers(t *testing.T) {
	var w hedge.Window
	for range hedge.WindowSize {
		w.Add(time.Hour)
	}
	for range hedge.WindowSize {
		w.Add(time.Second)
	}
	if q, ok := w.Quantile(0.99); !ok || q != time.Second || w.Len() != hedge.WindowSize {
		t.Fatalf("%v %v %d; the old hour should be gone", q, ok, w.Len())
	}
}

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
	if c := (hedge.Config{Adaptive: true}); !c.On() || hedge.DefaultMinDelay != 50*time.Millisecond || hedge.DefaultQuantile != 0.95 {
		t.Fatalf("%+v", c)
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

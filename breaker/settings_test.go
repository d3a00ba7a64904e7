package breaker_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/llm"
)

// TestBucketCountIsBounded: a BucketPeriod tiny next to its Window would
// make a window of millions of buckets (1ns over the default 30s window
// killed the process at Build): it is refused with what to set instead,
// and the bound itself is accepted.
func TestBucketCountIsBounded(t *testing.T) {
	for _, s := range []breaker.Config{
		{BucketPeriod: time.Nanosecond},
		{BucketPeriod: time.Microsecond},
		{Window: time.Hour, BucketPeriod: time.Second},
	} {
		_, err := breaker.New("t", s)
		if !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), "more than the 1000 allowed") {
			t.Errorf("%+v: got %v; want llm.ErrInvalidConfig saying at most 1000 buckets are allowed", s, err)
		}
	}
	d := breaker.DefaultWindow / breaker.MaxBuckets
	for _, s := range []breaker.Config{
		{BucketPeriod: d},         // exactly MaxBuckets buckets
		{Window: 24 * time.Hour},  // Window/DefaultBuckets
		{Window: time.Nanosecond}, // one bucket
	} {
		if _, err := breaker.New("t", s); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	if _, err := breaker.New("t", breaker.Config{BucketPeriod: d / 2}); err == nil {
		t.Errorf("BucketPeriod %v (twice MaxBuckets) accepted", d/2)
	}
}

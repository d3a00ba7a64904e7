package budget

import (
	"cmp"
	"context"
	"math"
	"sync/atomic"

	"github.com/backstop-llm/backstop/internal/problems"
)

// Defaults of a zero TokenBucketConfig: the AWS SDK standard retry mode's
// shape (PROTOCOLS.md), 100 retries from a full bucket, one retry earned
// back per 5 successes.
const (
	defaultCapacity = 500.0
	defaultCost     = 5.0
	defaultRefund   = 1.0
)

// maxCapacity is the largest Capacity NewTokenBucket accepts.
const maxCapacity = 1e12

// milli is the fixed-point scale of a TokenBucket: tokens are kept in
// thousandths, so fractional costs and refunds are exact to 0.001.
const milli = 1000

// TokenBucketConfig configures a TokenBucket. The zero value means the
// documented defaults field by field, so TokenBucketConfig{Cost: 10}
// changes only that. Amounts are kept to the nearest thousandth of a token.
type TokenBucketConfig struct {
	// Capacity is the most tokens the bucket holds; it starts full. 0 means
	// 500. Capacity/Cost is the burst of retries a
	// healthy target may send at once when it starts failing.
	Capacity float64
	// Cost is the tokens one retry takes. 0 means 5; it must
	// be at least 0.001 and at most Capacity. Raise it to retry less.
	Cost float64
	// Refund is the tokens one successful attempt puts back, up to
	// Capacity. 0 means 1; it must be at least 0.001.
	// Cost/Refund successes earn one retry back.
	Refund float64
}

// withDefaults returns c with every zero field set to its default.
func (c TokenBucketConfig) withDefaults() TokenBucketConfig {
	c.Capacity = cmp.Or(c.Capacity, defaultCapacity)
	c.Cost = cmp.Or(c.Cost, defaultCost)
	c.Refund = cmp.Or(c.Refund, defaultRefund)
	return c
}

// Validate reports every problem with c at once, each wrapping
// llm.ErrInvalidConfig: negative, NaN or infinite amounts, a Capacity above
// 1e12, a Cost or Refund below 0.001, a Cost above the Capacity.
func (c TokenBucketConfig) Validate() error {
	found := problems.In(errHead, "token bucket")
	bad := found.Addf
	ok := true
	check := func(field string, v, def float64) {
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0) || v < 0:
			bad("%s is %v; use a positive number of tokens, or 0 for the default (%v)", field, v, def)
			ok = false
		case v > maxCapacity:
			bad("%s is %v; it must be at most %v tokens", field, v, float64(maxCapacity))
			ok = false
		case v > 0 && math.Round(v*milli) == 0:
			bad("%s is %v; it must be at least 0.001 tokens (amounts are kept to a thousandth)", field, v)
			ok = false
		}
	}
	check("Capacity", c.Capacity, defaultCapacity)
	check("Cost", c.Cost, defaultCost)
	check("Refund", c.Refund, defaultRefund)
	if d := c.withDefaults(); ok && d.Cost > d.Capacity {
		bad("Cost (%v) is above Capacity (%v), so no retry could ever be granted; raise Capacity or lower Cost", d.Cost, d.Capacity)
	}
	return found.Err()
}

// TokenBucket is a retry budget shaped like the AWS SDK's standard retry
// mode: a bucket of tokens that starts full, from
// which each retry takes Cost and to which each successful attempt returns
// Refund, up to Capacity. When fewer than Cost tokens are left, retries are
// refused until successes refill the bucket. Unlike a Ratio it does not
// forget with time: a target that keeps failing stays without retries until
// it succeeds again.
//
// Tokens are kept in thousandths in one atomic integer, updated by a
// compare-and-swap loop, so the count can never go below zero or above
// Capacity. Record of a success on a full bucket, the healthy path, is a
// single atomic load. Neither Record nor Withdraw allocates.
type TokenBucket struct {
	tokens   atomic.Int64 // in thousandths
	capacity int64
	cost     int64
	refund   int64
	config   TokenBucketConfig
}

// NewTokenBucket returns a full token bucket configured by c, whose zero
// fields take their defaults. It returns an error wrapping llm.ErrInvalidConfig,
// naming each field at fault, when c is invalid.
func NewTokenBucket(c TokenBucketConfig) (*TokenBucket, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	t := &TokenBucket{
		capacity: int64(math.Round(c.Capacity * milli)),
		cost:     int64(math.Round(c.Cost * milli)),
		refund:   int64(math.Round(c.Refund * milli)),
		config:   c,
	}
	t.tokens.Store(t.capacity)
	return t, nil
}

// Record puts Refund tokens back, up to Capacity, when o is a success, of a
// first attempt or of a retry alike. A failure takes nothing: retries pay
// when Withdraw grants them.
func (t *TokenBucket) Record(_ context.Context, o Outcome) {
	if o.Success {
		t.add(t.refund)
	}
}

// Withdraw takes Cost tokens and grants a retry when at least Cost tokens
// are left; otherwise it takes nothing and returns ErrExhausted.
func (t *TokenBucket) Withdraw(_ context.Context) error {
	for {
		cur := t.tokens.Load()
		if cur < t.cost {
			return ErrExhausted
		}
		if t.tokens.CompareAndSwap(cur, cur-t.cost) {
			return nil
		}
	}
}

// Refund gives back the Cost of a retry Withdraw granted that was not sent,
// up to Capacity.
func (t *TokenBucket) Refund(_ context.Context) { t.add(t.cost) }

// add puts n millitokens back, up to capacity.
func (t *TokenBucket) add(n int64) {
	for {
		cur := t.tokens.Load()
		if cur >= t.capacity || t.tokens.CompareAndSwap(cur, min(cur+n, t.capacity)) {
			return
		}
	}
}

// tokensNow returns the tokens in the bucket now.
func (t *TokenBucket) tokensNow() float64 {
	return float64(t.tokens.Load()) / milli
}

// settings returns the configuration t runs with, defaults filled in.
func (t *TokenBucket) settings() TokenBucketConfig { return t.config }

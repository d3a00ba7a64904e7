package plan

import (
	"math/rand/v2"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// Attempts returns how many attempts in all a target with table t may make while failing
// with kind k under policy p, shouldRetry being the provider's
// x-should-retry header (nil when absent), which overrides the Retry column.
func Attempts(t retry.Table, k llm.Kind, p retry.Policy, shouldRetry *bool) int {
	r := t.Rule(k)
	again := r.Retry
	if shouldRetry != nil {
		again = *shouldRetry
	}
	if !again {
		return 1
	}
	n := p.WithDefaults().MaxAttempts
	if r.Attempts > 0 && r.Attempts < n {
		n = r.Attempts
	}
	return n
}

// backoff returns the wait before retry n (n = 0 before the first retry),
// given the previous wait (used only by DecorrelatedJitter; pass 0 before the
// first retry). Zero fields of p take their defaults.
func backoff(p retry.Policy, n int, prev time.Duration) time.Duration {
	p = p.WithDefaults()
	exp := p.Cap
	if n < 62 {
		if e := p.Base << n; e > 0 && e>>n == p.Base && e < p.Cap {
			exp = e
		}
	}
	switch p.Jitter {
	case retry.NoJitter:
		return exp
	case retry.EqualJitter:
		return exp/2 + uniform(exp-exp/2)
	case retry.DecorrelatedJitter:
		if prev < p.Base {
			prev = p.Base
		}
		hi := min(p.Cap, 3*prev)
		if hi <= p.Base {
			return hi
		}
		return p.Base + uniform(hi-p.Base)
	default:
		return uniform(exp)
	}
}

// Wait returns the wait before retry n of a target under policy p (n = 0 before the first retry)
// after a failure that asked for retryAfter (0 when it asked for none):
// retryAfter plus up to Pad at random, never less than retryAfter; or,
// when no wait was asked for, a backoff by p's Jitter, prev being the
// previous wait (used only by DecorrelatedJitter; 0 before the first
// retry). Zero fields of p take their defaults.
func Wait(p retry.Policy, n int, prev, retryAfter time.Duration) time.Duration {
	if retryAfter <= 0 {
		return backoff(p, n, prev)
	}
	p = p.WithDefaults()
	return retryAfter + uniform(p.Pad)
}

// uniform returns a random duration in [0, d]; 0 when d <= 0.
func uniform(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(d) + 1))
}

// Package budget owns retry budgets: the Budget interface the chain consults
// before every retry, and its two shapes, a ratio over a rolling window and
// a token bucket. A retry policy bounds the retries of one call; a budget
// bounds the retries of all calls to one target, so that when the target
// fails, retries stay a small fraction of the load (Google SRE book ch. 21:
// a 10% budget keeps the worst case near 1.1x the load instead of 3x).
//
// The chain calls Withdraw before every retry, never before a first
// attempt; when it returns ErrExhausted the chain sends no retry to that
// target and moves on to the next one. It calls Record after every attempt,
// so both shapes record with a few atomic operations and no allocation (a
// Ratio takes a mutex only to reset a bucket, once per bucket length).
//
// Ratio, the default, allows retries up to a share of the first attempts
// seen in a rolling window, with a floor so that a quiet target still
// retries: max(MinRetries, Ratio * first attempts) retries per Window,
// by default max(10, 10%) over 10s (the Finagle/Linkerd shape). Prefer it
// for most targets: it follows the load, and it forgets a bad spell once the
// window has passed.
//
// TokenBucket takes Cost tokens per retry and puts Refund back per success,
// up to Capacity; by default 500 tokens, 5 per retry, 1 back per success
// (the AWS SDK standard-mode shape). Prefer it when retries should come back
// only as the target proves healthy again, whatever the time: it allows a
// burst of Capacity/Cost retries, then one retry per Cost/Refund successes.
//
// In a chain, each target has its own budget: chain.Target{Budget: b}. A nil
// Budget means a new default Ratio for that target; Unlimited() switches
// budgeting off. Share one Budget between targets only to budget them as
// one backend.
package budget

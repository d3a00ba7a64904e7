// Package budget owns retry budgets: the Budget interface the chain consults
// before every retry, and its two shapes, a ratio over a rolling window and
// a token bucket, plus a ratio that many replicas share through Redis. A
// retry policy bounds the retries of one call; a budget bounds the retries
// of all calls to one target, so that when the target fails, retries stay
// a small fraction of the load (Google SRE book ch. 21:
// a 10% budget keeps the worst case near 1.1x the load instead of 3x).
//
// The chain calls Withdraw before every retry, never before a first
// attempt; when it returns ErrExhausted the chain sends no retry to that
// target and moves on to the next one. It calls Record after every attempt,
// so every shape records with a few atomic operations and no allocation (a
// Ratio takes a mutex only to reset a bucket, once per bucket length; a
// Shared budget makes a round trip once per batch of first attempts).
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
// Shared is a Ratio that the replicas of a service keep together in a
// Store, one key per chain and target: 40 replicas with a Ratio each grant
// a failing target 40 floors of retries, 40 on one Shared key grant
// max(MinRetries, Ratio * all their first attempts), one budget's worth.
// Record counts first attempts locally and writes them in batches;
// Withdraw is one round trip that decides atomically on the store's clock.
// The Store on Redis is redisstore's (redisstore.Store.Budget, a Lua
// script per round trip): this package imports no Redis client. When Redis is slow or down, each
// replica decides with a local budget after a short Timeout (50ms by
// default), says so through a callback and a log line, and tries Redis
// again a second later: no call fails or waits longer because of Redis.
//
// In a chain, each target has its own budget: chain.Target{Budget: b}. A nil
// Budget means a new default Ratio for that target; Unlimited() switches
// budgeting off. Share one Budget between targets only to budget them as
// one backend.
package budget

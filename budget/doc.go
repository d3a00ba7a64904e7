// Package budget will own retry budgets: the Budget interface the chain
// consults before every retry, a ratio budget over a rolling window and a
// token bucket. It is being built; until then chains retry within each
// target's retry.Policy only.
package budget

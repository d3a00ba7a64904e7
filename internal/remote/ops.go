package remote

import "time"

// The protocol between a shared store's logic (budget.Shared,
// breaker.Shared) and its Redis implementation (redisstore): internal, so
// that the public budget.Store and breaker.Store interfaces are implemented
// by redisstore and by the module's tests only.

// BudgetOpKind is what a BudgetOp does once it has added its first attempts.
type BudgetOpKind uint8

// The kinds of BudgetOp.
const (
	// BudgetCount adds the first attempts only.
	BudgetCount BudgetOpKind = iota
	// BudgetWithdraw grants a retry, and counts it in the current bucket, iff
	// the retries in the window are fewer than max(Floor,
	// floor(first attempts * Ratio / 10^6)).
	BudgetWithdraw
	// BudgetRefund takes back one granted retry, from the newest bucket that
	// counts one, if the window holds one.
	BudgetRefund
)

// BudgetOp is one round trip of a budget.Shared to its budget.Store: it adds
// Pending first attempts to the current bucket, then does what Kind says.
// The window is Buckets buckets of Bucket each, epochs of the store's own
// clock (Redis's TIME, so that replicas whose clocks disagree agree): a
// bucket a whole window old, or more than a window ahead, no longer
// counts, and neither does anything the store did not write (a count that
// is not a whole number, say). Every op that changes the window keeps it
// for TTL after the change, and so does one that finds it kept for good
// (written by something else); nothing lingers once the traffic stops.
type BudgetOp struct {
	Kind    BudgetOpKind
	Pending int64
	// Bucket is a bucket's length, at least a millisecond; Buckets is how
	// many make the window.
	Bucket  time.Duration
	Buckets int
	// Ratio, in millionths, and Floor (0 for none) decide an BudgetWithdraw.
	Ratio, Floor int64
	// TTL is how long the window outlives its last change.
	TTL time.Duration
}

// BudgetResult is what a budget.Store answers to a BudgetOp.
type BudgetResult struct {
	// Granted reports that an BudgetWithdraw granted its retry.
	Granted bool
	// Firsts and Retries are the first attempts and granted retries in the
	// window, the op's own changes included.
	Firsts, Retries int64
	// Repaired is empty, or names what the store found where it keeps the
	// window and deleted before it went on with an empty one (Redis's TYPE
	// of a value of another kind under its key, such as "string"): the
	// budget.Shared logs each repair.
	Repaired string
}

// Published is what the replicas sharing a breaker.Shared have published
// about one name (a chain's target): how much longer its breaker is held
// open, and how much longer its Retry-After gate is closed. Zero means not
// at all.
type Published struct {
	Name       string
	Open, Gate time.Duration
}

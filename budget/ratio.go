package budget

import (
	"cmp"
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/internal/problems"
)

// Defaults of a zero RatioConfig, as DESIGN.md sets them.
const (
	defaultRatio      = 0.1
	defaultWindow     = 10 * time.Second
	defaultMinRetries = 10
)

// bucketCount is the number of buckets a Ratio's Window is split into. Counts
// age out one bucket at a time, so an attempt counts for between
// (bucketCount-1)/bucketCount of the Window and the whole Window.
const bucketCount = 10

// minWindow is the shortest Window NewRatio accepts: bucketCount buckets of 1ms.
const minWindow = bucketCount * time.Millisecond

// ppm is the fixed-point scale of a Ratio: ratios are kept in millionths so
// that decimal ratios such as 0.1 are exact and the hot path uses integers.
const ppm = 1_000_000

// RatioConfig configures a Ratio budget. The zero value means the documented
// defaults field by field, so RatioConfig{Ratio: 0.2} changes only that.
type RatioConfig struct {
	// Ratio is the largest share of first attempts that may be retried in
	// the window: retries <= Ratio * first attempts. 0 means
	// 0.1 (the SRE book's 10%); it must be at most 1. It is kept to the
	// nearest millionth, so a Ratio below 0.0000005 leaves only the
	// MinRetries floor. To switch budgeting off use Unlimited, not a large
	// Ratio.
	Ratio float64
	// Window is how long an attempt counts. It is split into 10
	// buckets that age out one at a time. 0 means 10s; it
	// must be at least 10ms. Lengthen it to smooth bursts;
	// shorten it to let a recovered target retry again sooner.
	Window time.Duration
	// MinRetries is a floor: this many retries per window are allowed
	// whatever the ratio, so a quiet target (a few calls per window) still
	// retries. 0 means 10, the Finagle/Linkerd shape;
	// a negative value means no floor (the pure SRE-book budget, under
	// which nothing is retried until 1/Ratio first attempts were seen).
	MinRetries int
}

// withDefaults returns c with every zero field set to its default.
func (c RatioConfig) withDefaults() RatioConfig {
	c.Ratio = cmp.Or(c.Ratio, defaultRatio)
	c.Window = cmp.Or(c.Window, defaultWindow)
	c.MinRetries = cmp.Or(c.MinRetries, defaultMinRetries)
	return c
}

// Validate reports every problem with c at once, each wrapping
// llm.ErrInvalidConfig: a negative, NaN or infinite Ratio or one above 1, a
// negative Window or one shorter than minWindow.
func (c RatioConfig) Validate() error {
	found := problems.In(errHead, "ratio budget")
	bad := found.Addf
	switch {
	case math.IsNaN(c.Ratio) || math.IsInf(c.Ratio, 0) || c.Ratio < 0:
		bad("Ratio is %v; use a fraction in (0, 1], or 0 for the default (%v)", c.Ratio, defaultRatio)
	case c.Ratio > 1:
		bad("Ratio is %v; it must be at most 1 (no more retries than first attempts); use Unlimited() to switch budgeting off", c.Ratio)
	}
	problems.NotNegative(found, "Window", c.Window, defaultWindow)
	if c.Window > 0 && c.Window < minWindow {
		bad("Window is %v; it must be at least %v (%d buckets of 1ms); lengthen it or use 0 for %v", c.Window, minWindow, bucketCount, defaultWindow)
	}
	return found.Err()
}

// Ratio is a retry budget over a rolling window: the retries granted in the
// last Window may not exceed max(MinRetries, Ratio * first attempts in the
// last Window). First attempts are counted by Record (Outcome.Retry false);
// retries are counted when Withdraw grants them, so Record of a retry, and
// of any outcome's success or failure, costs nothing.
//
// The window is a fixed ring of bucketCount counters, each stamped with the
// bucket-length epoch it counts; a bucket whose epoch is stale is reset on
// first touch, under a mutex held only for that reset (once per bucket
// length at most). Record is one monotonic clock read, one load of the
// current epoch (kept off the counters' cache line) and one atomic add;
// Withdraw reads the ring, and only when it may grant adds one retry and
// reads the ring again, undoing the add if the budget was overdrawn
// meanwhile. A refused Withdraw writes nothing, so a storm of refusals does
// not contend. Neither allocates.
//
// Concurrent Withdraws never grant more than the allowance they see: each
// grant reserves its retry before it checks the total, so of any set of
// grants the last to reserve sees all the others, even across a bucket
// boundary. The approximations need a goroutine to stall between reading
// the clock and updating a bucket for about a whole Window (9 bucket
// lengths): its count then lands in the bucket's newer epoch, or is lost if
// it raced that bucket's reset. A first attempt counted late raises a later
// allowance by Ratio (a tenth of a retry by default), a retry counted late
// only lowers it, and a lost count lowers the allowance (a first attempt) or
// raises it by one (a retry). So a Ratio over-grants by at most about one
// retry per goroutine so stalled, in practice none.
//
// Time is read with time.Since from an instant taken by NewRatio, so a
// Ratio built inside a testing/synctest bubble runs on its virtual clock.
type Ratio struct {
	base       time.Time // monotonic origin of epochs
	width      int64     // bucket length, in nanoseconds
	ratio      int64     // Ratio in millionths
	minRetries int64     // floor; 0 for none
	config     RatioConfig

	// current is the newest epoch whose bucket has been reset. It is read
	// by every Record and written once per bucket length, so it sits away
	// from the counters, whose cache line every Record writes.
	current atomic.Int64

	mu      sync.Mutex // held only to reset a stale bucket
	_       [cacheLine]byte
	buckets [bucketCount]bucket
}

// cacheLine is the cache line size assumed for padding.
const cacheLine = 64

// bucket counts the attempts of one epoch (one bucket length).
type bucket struct {
	epoch   atomic.Int64
	firsts  atomic.Int64
	retries atomic.Int64
}

// NewRatio returns a ratio budget configured by c, whose zero fields take
// their defaults: NewRatio(RatioConfig{}) is the default budget, retries
// at most 10% of first attempts over a 10s window with a floor of 10
// retries per window (it never fails). Each call returns an independent
// budget. It returns an error wrapping llm.ErrInvalidConfig, naming each
// field at fault, when c is invalid.
func NewRatio(c RatioConfig) (*Ratio, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	r := &Ratio{
		base:   time.Now(),
		width:  int64(c.Window / bucketCount),
		ratio:  int64(math.Round(c.Ratio * ppm)),
		config: c,
	}
	if c.MinRetries > 0 {
		r.minRetries = int64(c.MinRetries)
	}
	r.current.Store(-1)
	for i := range r.buckets {
		// Bucket i counts epochs i, i+bucketCount, …; start each one a whole
		// ring in the past so that it is stale, and empty, from the start.
		r.buckets[i].epoch.Store(int64(i) - bucketCount)
	}
	return r, nil
}

// Record counts o if it is a first attempt; retries were counted when
// Withdraw granted them, and successes and failures do not matter to a
// ratio budget.
func (r *Ratio) Record(_ context.Context, o Outcome) {
	if o.Retry {
		return
	}
	var e int64
	if o.At.IsZero() {
		e = r.now()
	} else {
		e = max(int64(o.At.Sub(r.base)), 0) / r.width // a time before NewRatio counts in the first bucket
	}
	r.bucket(e).firsts.Add(1)
}

// Withdraw grants a retry, and counts it, when the retries granted in the
// window are fewer than max(MinRetries, Ratio * first attempts in the
// window); otherwise it returns ErrExhausted. It does not allocate.
func (r *Ratio) Withdraw(_ context.Context) error {
	return r.withdraw(r.now())
}

// withdraw is Withdraw at epoch e.
func (r *Ratio) withdraw(e int64) error {
	firsts, retries := r.sum(e)
	if retries >= r.allowance(firsts) {
		return ErrExhausted // no write: a refused storm does not contend
	}
	b := r.bucket(e)
	b.retries.Add(1)
	// Reserve, then check: of concurrent withdrawals, the last to reserve
	// sees every other reservation, so they cannot all pass on one slot.
	if firsts, retries = r.sum(e); retries > r.allowance(firsts) {
		b.retries.Add(-1)
		return ErrExhausted
	}
	return nil
}

// Refund takes back a retry Withdraw granted that was not sent: it is no
// longer counted against the window.
func (r *Ratio) Refund(_ context.Context) {
	r.bucket(r.now()).retries.Add(-1)
}

// counts returns the first attempts recorded and the retries granted in the
// current window. It is meant for tests and telemetry.
func (r *Ratio) counts() (firsts, retries int64) {
	return r.sum(r.now())
}

// remaining returns how many more retries Withdraw would grant now if no
// other attempt were recorded. It is meant for tests and telemetry.
func (r *Ratio) remaining() int64 {
	firsts, retries := r.sum(r.now())
	return max(0, r.allowance(firsts)-retries)
}

// settings returns the configuration r runs with, defaults filled in.
func (r *Ratio) settings() RatioConfig { return r.config }

// now returns the current epoch: bucket lengths since NewRatio.
func (r *Ratio) now() int64 {
	return int64(time.Since(r.base)) / r.width
}

// bucket returns the bucket counting epoch e, reset first if it still holds
// an older epoch. A bucket already holding a newer epoch (the caller's clock
// read is a whole ring stale) is returned as is.
func (r *Ratio) bucket(e int64) *bucket {
	if r.current.Load() == e {
		return &r.buckets[e%bucketCount] // the common case: no read of the contended counters' line
	}
	return r.older(e)
}

// older is bucket for an epoch other than the newest reset one.
func (r *Ratio) older(e int64) *bucket {
	b := &r.buckets[e%bucketCount]
	if b.epoch.Load() < e {
		r.roll(b, e)
	}
	return b
}

// roll resets b to count epoch e, unless another goroutine already did. The
// counters are zeroed before the epoch is published, so a goroutine that
// sees epoch e adds to zeroed counters and its count is kept.
func (r *Ratio) roll(b *bucket, e int64) {
	r.mu.Lock()
	if b.epoch.Load() < e {
		b.firsts.Store(0)
		b.retries.Store(0)
		b.epoch.Store(e)
	}
	if r.current.Load() < e {
		r.current.Store(e) // after the reset: current == e means bucket e is ready
	}
	r.mu.Unlock()
}

// sum adds up the buckets still in the window ending at epoch e. bucketCount
// newer than e (another goroutine's clock is ahead) are counted too, so that
// a withdrawal near a bucket boundary sees every reservation made after it.
func (r *Ratio) sum(e int64) (firsts, retries int64) {
	for i := range r.buckets {
		b := &r.buckets[i]
		if b.epoch.Load() > e-bucketCount {
			firsts += b.firsts.Load()
			retries += b.retries.Load()
		}
	}
	return firsts, max(0, retries)
}

// allowance returns the retries allowed in a window with firsts first
// attempts: max(MinRetries, floor(Ratio * firsts)).
func (r *Ratio) allowance(firsts int64) int64 {
	var a int64
	if firsts < math.MaxInt64/ppm {
		a = firsts * r.ratio / ppm
	} else {
		a = firsts / ppm * r.ratio
	}
	return max(a, r.minRetries)
}

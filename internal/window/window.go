// Package window counts two kinds of event over a rolling time window,
// lock-free on the counting path. The breaker uses it for its failure
// ratio; it reads time with time.Since from an instant taken at New, so a
// window made inside a testing/synctest bubble runs on its virtual clock.
package window

import (
	"sync"
	"sync/atomic"
	"time"
)

// Window counts events of two kinds (0 and 1) over the last Length, in
// buckets that age out one at a time. The zero Window is not usable; use
// New.
type Window struct {
	base    time.Time
	width   int64 // bucket length in nanoseconds
	mu      sync.Mutex
	buckets []bucket
}

type bucket struct {
	epoch atomic.Int64
	n     [2]atomic.Int64
}

// New returns a window of length split into buckets of width (at least one
// nanosecond; the window holds length/width buckets, at least one).
func New(length, width time.Duration) *Window {
	width = max(width, 1)
	n := max(int(length/width), 1)
	w := &Window{base: time.Now(), width: int64(width), buckets: make([]bucket, n)}
	for i := range w.buckets {
		w.buckets[i].epoch.Store(int64(i - n)) // stale from the start
	}
	return w
}

// Add counts one event of kind k (0 or 1) now.
func (w *Window) Add(k int) { w.AddAt(k, time.Now()) }

// AddAt counts one event of kind k (0 or 1) at now, a time read from the
// monotonic clock (time.Now, or one derived from it with Add), for callers
// that have already read the clock.
func (w *Window) AddAt(k int, now time.Time) { w.AddNAt(k, 1, now) }

// AddNAt counts n events of kind k (0 or 1) at now, as AddAt does one: the
// breaker's spend breaker counts nanodollars.
func (w *Window) AddNAt(k int, n int64, now time.Time) {
	e := max(int64(now.Sub(w.base)), 0) / w.width // a time before New counts in the first bucket
	b := &w.buckets[e%int64(len(w.buckets))]
	if b.epoch.Load() != e {
		w.reset(b, e)
	}
	b.n[k].Add(n)
}

// reset empties b for epoch e unless a newer epoch already claimed it.
func (w *Window) reset(b *bucket, e int64) {
	w.mu.Lock()
	if b.epoch.Load() < e {
		b.n[0].Store(0)
		b.n[1].Store(0)
		b.epoch.Store(e)
	}
	w.mu.Unlock()
}

// Reset forgets every event counted so far. An Add racing it may be lost.
func (w *Window) Reset() {
	w.mu.Lock()
	for i := range w.buckets {
		w.buckets[i].n[0].Store(0)
		w.buckets[i].n[1].Store(0)
	}
	w.mu.Unlock()
}

// Sums returns the events of each kind counted in the window now.
func (w *Window) Sums() (n0, n1 int64) {
	e := int64(time.Since(w.base)) / w.width
	oldest := e - int64(len(w.buckets)) + 1
	for i := range w.buckets {
		b := &w.buckets[i]
		if be := b.epoch.Load(); be >= oldest && be <= e {
			n0 += b.n[0].Load()
			n1 += b.n[1].Load()
		}
	}
	return n0, n1
}

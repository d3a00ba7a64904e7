package rank

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// Load is one target's load as LeastLoaded and Latency see it: the
// requests in flight and a peak-EWMA latency. It is safe for concurrent
// use; the zero value is ready. Times are read on one monotonic clock of
// the caller's (durations since an epoch of its choosing), the same for
// every call.
type Load struct {
	inflight atomic.Int32

	mu    sync.Mutex
	ewma  float64       // nanoseconds; 0 until the first sample
	stamp time.Duration // when ewma was last updated
}

// Start counts a request sent.
func (l *Load) Start() { l.inflight.Add(1) }

// End counts the end of a request Start counted. took, when positive, is
// a latency sample (an answer, or a timeout: how long the target made the
// caller wait); 0 adds none (a request canceled by the caller says
// nothing of the target).
func (l *Load) End(now, took time.Duration) {
	l.inflight.Add(-1)
	if took <= 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	rtt := float64(took)
	if l.ewma == 0 || rtt > l.ewma {
		l.ewma = rtt // the peak: a slowdown counts at once
	} else {
		w := decay(now - l.stamp)
		l.ewma = l.ewma*w + rtt*(1-w)
	}
	l.stamp = now
}

// InFlight returns the requests in flight.
func (l *Load) InFlight() int { return int(l.inflight.Load()) }

// Latency returns the peak-EWMA latency at now, decayed for the time since
// the last sample so that a target that was slow and then left alone is
// tried again; 0 before the first sample.
func (l *Load) Latency(now time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ewma == 0 {
		return 0
	}
	return time.Duration(l.ewma*decay(now-l.stamp)) + 1 // never 0 once known
}

// decay is the weight an old figure keeps after d.
func decay(d time.Duration) float64 {
	if d <= 0 {
		return 1
	}
	return math.Exp(-float64(d) / float64(defaultDecay))
}

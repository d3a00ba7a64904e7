package degrade

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/cache"
)

// writeBehind writes a LastGood's answers to its store on a goroutine of
// its own, in order: at most one, started by the first answer queued and
// gone as soon as the queue is empty.
type writeBehind struct {
	store cache.Store
	bound time.Duration // bounds each Set; 0 when the store bounds its own

	mu      sync.Mutex
	queue   []pending // queue[head:] waits, oldest first
	head    int
	waiting int  // answers in the queue (not barriers), at most lastGoodQueue
	running bool // the writer runs: the queue is not empty, or a Set is on its way

	// Since the last flush: answers dropped with the queue full, answers
	// the store failed to take, and its last error.
	dropped, failed int
	lastErr         error
}

// pending is an answer to write, or a flush's barrier (done set), closed
// when the writer reaches it.
type pending struct {
	ctx   context.Context // the call's values, without its cancellation
	key   string
	entry cache.Entry
	ttl   time.Duration
	done  chan struct{}
}

// errQueueFull is Remember's error for an answer dropped with the queue
// full.
var errQueueFull = fmt.Errorf("last-known-good: %d answers are waiting for the store already; this one is not remembered", lastGoodQueue)

// add queues an answer and starts the writer if none runs.
func (w *writeBehind) add(ctx context.Context, key string, e cache.Entry, ttl time.Duration) error {
	w.mu.Lock()
	if w.waiting >= lastGoodQueue {
		w.dropped++
		w.mu.Unlock()
		return errQueueFull
	}
	w.queue = append(w.queue, pending{ctx: context.WithoutCancel(ctx), key: key, entry: e, ttl: ttl})
	w.waiting++
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go w.run()
	}
	return nil
}

// run writes the queue until it is empty, then returns.
func (w *writeBehind) run() {
	for {
		w.mu.Lock()
		if w.head == len(w.queue) {
			w.queue, w.head = w.queue[:0], 0 // keep the array for the next burst
			w.running = false
			w.mu.Unlock()
			return
		}
		p := w.queue[w.head]
		w.queue[w.head] = pending{} // let the answer go once written
		w.head++
		if p.done == nil {
			w.waiting--
		}
		w.mu.Unlock()
		if p.done != nil {
			close(p.done)
			continue
		}
		ctx, cancel := p.ctx, context.CancelFunc(nil)
		if w.bound > 0 {
			ctx, cancel = context.WithTimeout(ctx, w.bound)
		}
		err := w.store.Set(ctx, p.key, p.entry, p.ttl)
		if cancel != nil {
			cancel()
		}
		if err != nil {
			w.mu.Lock()
			w.failed++
			w.lastErr = err
			w.mu.Unlock()
		}
	}
}

// flush is lastGood.Flush.
func (w *writeBehind) flush(ctx context.Context) error {
	w.mu.Lock()
	var done chan struct{}
	if w.running {
		done = make(chan struct{})
		w.queue = append(w.queue, pending{done: done})
	}
	w.mu.Unlock()
	var errs []error
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			w.mu.Lock()
			n := w.waiting
			w.mu.Unlock()
			errs = append(errs, fmt.Errorf("last-known-good: %d answers were still waiting for the store: %w", n, ctx.Err()))
		}
	}
	w.mu.Lock()
	dropped, failed, lastErr := w.dropped, w.failed, w.lastErr
	w.dropped, w.failed, w.lastErr = 0, 0, nil
	w.mu.Unlock()
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("last-known-good: %d answers were not remembered: %d were waiting for the store already (lastGoodQueue); a faster store, or a Timeout that fails sooner, keeps up", dropped, lastGoodQueue))
	}
	if failed > 0 {
		errs = append(errs, fmt.Errorf("last-known-good: %d answers were not remembered; the store's last error: %w", failed, lastErr))
	}
	return errors.Join(errs...)
}

package breaker

// The poller: the one goroutine that keeps a Shared's breakers and gates in
// step with the store while calls come.

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// defaultRefresh is how often a Shared's poller reads the other replicas'
// breakers and gates, and so how stale what a call decides on may be,
// when SharedConfig.Refresh is 0.
const defaultRefresh = 100 * time.Millisecond

// poller keeps a Shared's breakers and gates in step with the store: it
// reads the store every refresh while calls come, writes what the calls
// kept for it (PublishLater, PublishGateLater) as soon as they wake it, and
// exits once no call came for two refreshes.
type poller struct {
	s       *Shared
	refresh time.Duration
	timeout time.Duration // bounds each round trip; a call waits for the first read at most this long
	base    time.Time     // origin of the times below

	// read is when the running poller's last read that the store
	// answered began, since base, +1; 0: none. A poller that stops resets
	// it under mu: nothing keeps the mirror in step until the next one
	// runs, so what its reads found counts for no call after it (the call
	// that starts the next waits for that one's first read).
	read atomic.Int64
	used atomic.Int64 // when a call last used the mirror, since base
	// waiting counts the calls waiting for a breaker's probe (another
	// replica's, perhaps): the poller keeps reading while there are any.
	waiting atomic.Int32

	kick chan struct{} // wakes the poller: something to write (buffered, 1)

	mu      sync.Mutex
	running bool
	polled  chan struct{} // closed when the poller's next read ends
	stop    chan struct{} // closed by close; nil while no poller runs
	done    sync.WaitGroup
}

// staleAfter is how old the mirror's last read may be before a call
// decides on local state: two refreshes (one read that failed, the next
// that answered) and a round trip.
func (p *poller) staleAfter() time.Duration { return 2*p.refresh + p.timeout }

func (p *poller) now() int64 { return int64(time.Since(p.base)) }

// fresh reports whether a read of the running poller that the store
// answered began within staleAfter.
func (p *poller) fresh(now int64) bool {
	r := p.read.Load()
	return r != 0 && now-(r-1) <= int64(p.staleAfter())
}

// ensure starts the poller unless it runs, and returns the channel closed
// when its next read ends, and whether it was just started.
func (p *poller) ensure() (polled chan struct{}, started bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running {
		p.running, started = true, true
		p.polled = make(chan struct{})
		p.stop = make(chan struct{})
		p.done.Add(1)
		go p.poll(p.stop)
	}
	return p.polled, started
}

// wake has the poller write what a call kept for it, at once.
func (p *poller) wake() {
	p.used.Store(p.now())
	p.ensure()
	select {
	case p.kick <- struct{}{}:
	default: // woken already
	}
}

// poll is the poller: a read (after the writes kept for it) every refresh
// or when woken, until no call used the mirror for two refreshes or close
// stops it.
func (p *poller) poll(stop chan struct{}) {
	defer p.done.Done()
	tick := time.NewTicker(p.refresh)
	defer tick.Stop()
	for {
		began := p.now()
		err := p.s.pollOnce(context.Background())
		p.mu.Lock()
		if stop != p.stop || !p.running {
			p.mu.Unlock()
			return // closed meanwhile: close closed polled and reset read
		}
		if err == nil {
			p.read.Store(began + 1)
		}
		close(p.polled)
		p.polled = make(chan struct{})
		p.mu.Unlock()
		select {
		case <-stop:
			return
		case <-p.kick:
			continue
		case <-tick.C:
		}
		p.mu.Lock()
		if stop != p.stop || !p.running {
			p.mu.Unlock()
			return // closed (and maybe restarted) while the tick fired
		}
		if p.now()-p.used.Load() > int64(2*p.refresh) && len(p.kick) == 0 && p.waiting.Load() == 0 {
			p.running = false // idle: the next call starts another
			p.read.Store(0)   // and waits for its first read
			close(p.polled)   // nobody waits for a read that will not come
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// Fresh makes sure a call decides on a fresh mirror of what the other
// replicas published: one the poller read within two Refreshes and a
// Timeout. It costs no round trip while the poller runs; a call whose
// mirror is stale (the first after a pause, which starts the poller, and
// those that come during its first read) waits for the poller's read in
// flight (bounded by the Timeout, twice when it writes first), unless the
// store is known to be down and the poller was running already. It
// reports false when the call must nonetheless decide on this replica's
// own state (and ctx has not ended): the caller says so.
func (s *Shared) Fresh(ctx context.Context) bool {
	p := &s.poller
	now := p.now()
	p.used.Store(now)
	polled, started := p.ensure()
	if p.fresh(now) {
		return true
	}
	if started || s.Available() {
		// The poller's read is bounded by the Timeout, and records a
		// failure before it ends; this bound is for its writes first.
		t := time.NewTimer(2*p.timeout + time.Millisecond)
		select {
		case <-polled:
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if p.fresh(p.now()) {
			return true
		}
	}
	return ctx.Err() != nil
}

// waitFor is b.Wait, keeping the poller reading while the call waits: the
// wait for another replica's probe ends when a read finds its publication
// withdrawn.
func (p *poller) waitFor(ctx context.Context, b *Breaker) (ticket, error) {
	p.waiting.Add(1)
	p.ensure()
	defer func() {
		p.used.Store(p.now())
		p.waiting.Add(-1)
	}()
	return b.wait(ctx)
}

// Settle waits, at most until ctx ends, for the poller's read in flight
// and the next, if it runs, so that what calls kept for it is written.
func (s *Shared) Settle(ctx context.Context) {
	p := &s.poller
	for range 2 { // the read in flight may have begun before the writes were kept
		p.mu.Lock()
		running, polled := p.running, p.polled
		p.mu.Unlock()
		if !running {
			return
		}
		select {
		case <-polled:
		case <-ctx.Done():
			return
		}
	}
}

// Close stops the poller, if one runs, and waits for it. A call after
// Close starts it again.
func (s *Shared) Close() {
	p := &s.poller
	p.mu.Lock()
	if p.running {
		close(p.stop)
		close(p.polled)
		p.running = false
		p.read.Store(0)
	}
	p.mu.Unlock()
	p.done.Wait()
}

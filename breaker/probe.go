package breaker

// Active probes: a request of the caller's choosing, sent on a timer while
// the breaker is open, so that recovery is found without a user's call
// (StartProbing).

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/retry"
)

// defaultProbeTimeout bounds an active probe started with no timeout.
const defaultProbeTimeout = 10 * time.Second

// probeRetry is how long a prober waits when its breaker was not ready for
// a probe that was due (another replica's publication held it, a probe's
// slot was taken, the probe was canceled): it looks again then.
const probeRetry = time.Second

// StartProbing has the breaker probe its target actively: each time it
// opens, send is called when the open interval ends (ProbeAt), on a
// timer's goroutine, with a context that ends after timeout (0 or less
// means 10s), and what it returns is the probe's outcome. retry.NotFailure
// closes the breaker; retry.Failure or retry.Trip opens it again for
// twice as long (up to OpenFor), and the next probe goes when that ends;
// retry.Excluded (the probe was cut short) frees the probe slot, and the
// probe goes again a second later, as it does when the breaker was not
// ready for it (another replica's publication holds it open: see
// Shared.Sync). A send that panics counts as retry.Excluded, and the next
// probe goes one open interval later. When a Shared tracks the breaker,
// each probe's outcome is published to the other replicas at once.
//
// Set Config.ActiveProbe too, so that users' attempts never probe: without
// it they compete with send for the probe slot. No goroutine runs between
// probes but a timer's.
//
// stop ends the probing: no probe is sent after it returns, and it waits
// for one in flight. Probing also ends once stop is no longer reachable
// (at the latest when the next probe is due), so that a program that
// drops what holds stop without calling it does not probe for ever; for
// that, send must not hold what holds stop. Start probing once, before
// the breaker is used; a second StartProbing replaces the first. On a
// disabled breaker it does nothing.
func (b *Breaker) StartProbing(send func(ctx context.Context) retry.BreakerVerdict, timeout time.Duration) (stop func()) {
	if b.cb == nil || send == nil {
		return func() {}
	}
	if timeout <= 0 {
		timeout = defaultProbeTimeout
	}
	p := &prober{b: b, send: send, timeout: timeout}
	if old := b.prober.Swap(p); old != nil {
		old.halt()
	}
	if !b.closed.Load() {
		p.opened() // already open: its probe is due when the interval ends
	}
	h := &probing{p}
	runtime.AddCleanup(h, (*prober).halt, p)
	return h.stop
}

// probing is what StartProbing's stop holds: once it is collected, its
// prober halts.
type probing struct{ p *prober }

func (h *probing) stop() { h.p.close() }

// prober sends a breaker's active probes: one timer per opening, due when
// the breaker's open interval ends, and no goroutine but the timer's while
// a probe is in flight. A pending timer holds its prober, its breaker and
// its send, never what holds stop (see StartProbing).
type prober struct {
	b       *Breaker
	timeout time.Duration

	mu     sync.Mutex
	send   func(context.Context) retry.BreakerVerdict // nil once stopped: p then lets go of what send holds
	timer  *time.Timer
	flying sync.WaitGroup
}

// opened schedules a probe for when the breaker's open interval ends. It
// is called from the breaker's onStateChange, under its lock: it reads
// the breaker's atomics only.
func (p *prober) opened() { p.schedule(time.Until(p.b.probeAt())) }

// schedule sends a probe after d, replacing one scheduled.
func (p *prober) schedule(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.send == nil {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.timer = time.AfterFunc(max(d, 0), p.fire)
}

// fire sends the probe, if the breaker is still open and ready for one,
// and reports it: a success closes the breaker, a failure reopens it for a
// longer interval (whose opening schedules the next probe).
func (p *prober) fire() {
	p.mu.Lock()
	send := p.send
	if send == nil {
		p.mu.Unlock()
		return
	}
	p.flying.Add(1)
	p.mu.Unlock()
	defer p.flying.Done()
	b := p.b
	var ticket ticket
	defer func() {
		if recover() != nil { // a bug in send must not end the process from a timer
			ticket.Report(retry.Excluded) // the probe slot is free again
			p.schedule(b.openInterval())
		}
	}()
	ticket, err := b.probe()
	switch {
	case errors.Is(err, errNotOpen):
		return // closed meanwhile, or held by the replica that probes
	case err != nil:
		p.schedule(max(time.Until(b.probeAt()), probeRetry))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	verdict := send(ctx)
	ticket.ReportAt(verdict, time.Now())
	if b.shared != nil {
		_ = b.shared.publish(context.Background(), b)
	}
	if verdict == retry.Excluded {
		p.schedule(probeRetry) // the slot is free again: not the target's verdict
	}
}

// close stops p: no probe is sent after it returns.
func (p *prober) close() {
	p.mu.Lock()
	p.send = nil
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	p.flying.Wait()
}

// halt stops p from sending another probe, without waiting for one in
// flight or touching its timer: it runs on the runtime's cleanup
// goroutine, which may not stop a timer made in a testing/synctest
// bubble. The timer, when it fires, finds p stopped and schedules nothing
// more, and what p held can be collected.
func (p *prober) halt() {
	p.mu.Lock()
	p.send = nil
	p.mu.Unlock()
}

package chain

// Active probes: a request of the user's choosing, sent on a timer while a
// target's breaker is open, so that recovery is found without a user's
// call (Target.Probe).

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// DefaultProbeTimeout bounds an active probe of a target with no Timeout.
const DefaultProbeTimeout = 10 * time.Second

// probeRetry is how long a prober waits when its breaker was not ready for
// a probe that was due (another replica's publication held it, a probe's
// slot was taken): it looks again then.
const probeRetry = time.Second

// prober sends a target's active probe while its breaker is open: one
// timer per opening, due when the breaker's open interval ends, and no
// goroutine but the timer's while a probe is in flight. Chain.Close stops
// it, and so does the chain's collection (stopProbes).
//
// A pending timer holds its prober, and through it its target: neither
// may hold the Chain (nor may the target's breaker, budgets and shared
// state, through their callbacks), or a chain dropped without Close would
// never be collected and would probe for ever.
type prober struct {
	t      *target
	shared *breaker.Shared // the chain's, to tell the other replicas; nil unless Builder.Shared
	req    llm.Request     // the probe, prepared for t

	mu     sync.Mutex
	timer  *time.Timer
	closed bool
	flying sync.WaitGroup
}

// opened schedules a probe for when t's breaker's open interval ends. It
// is called from the breaker's OnStateChange, under the breaker's lock:
// it reads the breaker's atomics only.
func (p *prober) opened() { p.schedule(time.Until(p.t.breaker.ProbeAt())) }

// schedule sends a probe after d, replacing one scheduled.
func (p *prober) schedule(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.timer = time.AfterFunc(max(d, 0), p.fire)
}

// fire sends the probe, if the breaker is still open and ready for one,
// and reports it: a success closes the breaker, a failure reopens it for
// a longer interval (whose opening schedules the next probe).
func (p *prober) fire() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.flying.Add(1)
	p.mu.Unlock()
	defer p.flying.Done()
	t := p.t
	var ticket breaker.Ticket
	defer func() {
		if recover() != nil { // a provider's bug must not end the process from a timer
			ticket.Report(retry.Excluded) // the probe slot is free again
			p.schedule(t.breaker.OpenInterval())
		}
	}()
	ticket, err := t.breaker.Probe()
	switch {
	case errors.Is(err, breaker.ErrNotOpen):
		return // closed meanwhile, or held by the replica that probes
	case err != nil:
		p.schedule(max(time.Until(t.breaker.ProbeAt()), probeRetry))
		return
	}
	timeout := t.Timeout
	if timeout == 0 {
		timeout = DefaultProbeTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	resp, err := t.Provider.Complete(ctx, p.req)
	if err == nil && resp == nil {
		err = errNilResponse
	}
	verdict := retry.NotFailure
	if err != nil {
		verdict = t.table.Rule(llm.KindOf(err)).Breaker
	}
	ticket.ReportAt(verdict, time.Now())
	if p.shared != nil {
		_ = p.shared.Publish(context.Background(), t.breaker)
	}
	if verdict == retry.Excluded {
		p.schedule(probeRetry) // the slot is free again: not the target's verdict
	}
}

// close stops p: no probe is sent after it returns.
func (p *prober) close() {
	p.mu.Lock()
	p.closed = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	p.flying.Wait()
}

// stop stops p from sending another probe, without waiting for one in
// flight or touching its timer: it is called from the runtime's cleanup
// goroutine, which may not stop a timer made in a testing/synctest bubble.
// The timer, when it fires, finds p closed and schedules nothing more,
// and p and its target can be collected.
func (p *prober) stop() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// stopProbes is the cleanup of a chain that had active probes, run once
// nothing references the Chain: the probes of a chain dropped without
// Close stop, as Close would have stopped them.
func stopProbes(probers []*prober) {
	for _, p := range probers {
		p.stop()
	}
}

// watchProbes gives c's probers what they need of the chain, its shared
// state (built after them), and makes c's collection stop them.
func (c *Chain) watchProbes() {
	var probers []*prober
	for _, t := range c.targets {
		if t.prober != nil {
			t.prober.shared = c.shared
			probers = append(probers, t.prober)
		}
	}
	if probers != nil {
		runtime.AddCleanup(c, stopProbes, probers)
	}
}

// Close stops what a chain runs between calls: the active probes of its
// targets (Target.Probe), waiting for one in flight. Call it when the
// chain is no longer used: calls made after Close still work, but a target
// with an active probe whose breaker is open then stays skipped. It does
// not Flush. A chain dropped without Close is collected all the same, and
// its probes stop then (at the latest when the next one is due).
func (c *Chain) Close() {
	if c.shared != nil {
		c.shared.Close()
	}
	for _, t := range c.targets {
		if t.prober != nil {
			t.prober.close()
		}
	}
}

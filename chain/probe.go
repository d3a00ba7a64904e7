package chain

// Active probes: a request of the user's choosing, sent on a timer while a
// target's breaker is open, so that recovery is found without a user's
// call (Target.Probe).

import (
	"context"
	"errors"
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
// it.
type prober struct {
	c   *Chain
	t   *target
	req llm.Request // the probe, prepared for t

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
	p.c.report(context.Background(), t, ticket, verdict, time.Now())
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

// Close stops what a chain runs between calls: the active probes of its
// targets (Target.Probe), waiting for one in flight. Call it when the
// chain is no longer used: calls made after Close still work, but a target
// with an active probe whose breaker is open then stays skipped. It does
// not Flush.
func (c *Chain) Close() {
	for _, t := range c.targets {
		if t.prober != nil {
			t.prober.close()
		}
	}
}

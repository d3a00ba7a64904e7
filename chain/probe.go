package chain

// Active probes (Target.Probe): the request, and how its answer counts.
// The breaker sends it (breaker.Breaker.StartProbing).

import (
	"context"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// startProbes has the breaker of each of c's targets with a Probe send it
// while open, once the targets are assembled and tracked by the chain's
// shared state (whose store then hears each probe's outcome). c keeps
// the probes' stops, for Close; what the probes' timers hold (the target,
// its breaker) never holds them, nor c, so that a chain dropped without
// Close is collected, and its probes stop then.
func (c *Chain) startProbes() {
	for _, t := range c.targets {
		if len(t.Probe.Messages) == 0 {
			continue
		}
		req := t.Probe
		t.prepare(&req)
		c.probes = append(c.probes, t.breaker.StartProbing(t.probe(req), t.Timeout))
	}
}

// probe returns the send of t's active probe req: t's provider asked,
// and its answer counted for t's breaker by t's decision table.
func (t *target) probe(req llm.Request) func(context.Context) retry.BreakerVerdict {
	return func(ctx context.Context) retry.BreakerVerdict {
		resp, err := t.Provider.Complete(ctx, req)
		if err == nil && resp == nil {
			err = errNilResponse
		}
		if err != nil {
			return t.table.Rule(llm.KindOf(err)).Breaker
		}
		return retry.NotFailure
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
	for _, stop := range c.probes {
		stop()
	}
}

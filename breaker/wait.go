package breaker

import (
	"context"
	"errors"
	"math/bits"
	"time"
)

// rampStep is the pace at which Wait releases the callers that waited for
// a probe that succeeded: the first at once, then twice as many each
// rampStep (1, 2, 4, 8, ...), as TCP's slow start grows its window each
// round trip. A herd of 200 waiting callers is released over 7 steps,
// 1.75s, instead of at one instant onto a target that has just recovered.
const rampStep = 250 * time.Millisecond

// maxProbeWait bounds how long past ProbeAt a caller of Wait waits for the
// probe's outcome: the probe's own request may hang, and with
// Config.ActiveProbe something else must send it.
const maxProbeWait = 30 * time.Second

// pollProbe is how often a waiter past ProbeAt asks again for the probe
// slot that nobody has taken yet (gobreaker moves to half-open only when
// asked).
const pollProbe = 100 * time.Millisecond

// Wait is Allow for a caller that has nowhere else to go and time left:
// instead of failing at once while the breaker is open, it waits for the
// breaker's next probe and its outcome. It returns at once what Allow
// returns when the breaker lets the attempt through, and when ctx's
// deadline comes no later than the probe is due (ProbeAt): a caller whose
// deadline would pass first fails fast, as with Allow.
//
// While another replica holds the breaker open (see Shared.Sync), that
// replica probes: Wait waits for its probe, until the publication is
// withdrawn (the probe succeeded; the replica's Sync reads none) or ends,
// at most until ctx ends or for 30s, then releases the caller on
// the same ramp as below, counted from when the withdrawal was read; it
// returns ErrOpenElsewhere when ctx ends or time runs out first. A
// breaker open here that defers its probe to another replica waits the
// same way, then for its own probe.
//
// Otherwise it waits until the probe is due. Without Config.ActiveProbe
// the first waiter to ask then takes the probe slot: its ticket is the
// probe, its attempt finds out. The others wait for the outcome: a probe
// that fails opens the breaker again and they return ErrOpen; one that
// succeeds closes it, and they are released on a slow-start ramp (see
// 250ms) with a ticket each. A caller that waited is not retrying into
// a failing target: the probe found it healthy. Wait returns ErrOpen when
// ctx ends, or when no outcome came within 30s of ProbeAt.
func (b *Breaker) wait(ctx context.Context) (ticket, error) {
	t, err := b.allowNow()
	if err == nil || b.cb == nil {
		return t, err
	}
	if errors.Is(err, ErrOpenElsewhere) && b.closed.Load() {
		return b.waitElsewhere(ctx, err)
	}
	opens := b.opens.Load()
	due := b.probeAt()
	if due.IsZero() {
		return t, err // closed since: the caller may ask again
	}
	if dl, ok := ctx.Deadline(); ok && !dl.After(due) {
		return ticket{}, err
	}
	giveUp := due.Add(maxProbeWait)
	for {
		changed := *b.changed.Load()
		if b.opens.Load() != opens {
			return ticket{}, err // the probe failed
		}
		if b.closed.Load() {
			return b.ramp(ctx, opens, err)
		}
		now := time.Now()
		if !now.Before(giveUp) {
			return ticket{}, err
		}
		wake := due.Sub(now)
		if wake <= 0 {
			if t, aerr := b.allowNow(); aerr == nil {
				return t, nil // the probe, or closed meanwhile
			}
			wake = pollProbe
		}
		timer := time.NewTimer(min(wake, giveUp.Sub(now)))
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ticket{}, err
		}
		timer.Stop()
	}
}

// ramp releases a waiter after the probe closed the breaker: the k-th
// (from 0) to ask since the close goes rampStep x floor(log2(k+1)) after
// it, or at once when its deadline comes sooner (it has no time to queue).
func (b *Breaker) ramp(ctx context.Context, opens uint64, refused error) (ticket, error) {
	k := b.released.Add(1) - 1
	at := b.base.Add(time.Duration(b.recovered.Load()) + rampStep*time.Duration(bits.Len64(k+1)-1))
	if dl, ok := ctx.Deadline(); ok && dl.Before(at) {
		at = time.Now()
	}
	if d := time.Until(at); d > 0 {
		timer := time.NewTimer(d)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ticket{}, refused
		}
	}
	if b.opens.Load() != opens {
		return ticket{}, refused // it failed again meanwhile
	}
	return b.allowNow()
}

// waitElsewhere is Wait while another replica's publication holds the
// closed breaker open: it waits until the publication is withdrawn (that
// replica's probe succeeded) or ends, at most until ctx ends or
// maxProbeWait has passed, then releases the caller on the ramp from the
// withdrawal. A breaker that opened here meanwhile refuses it.
func (b *Breaker) waitElsewhere(ctx context.Context, refused error) (ticket, error) {
	opens := b.opens.Load()
	giveUp := time.Now().Add(maxProbeWait)
	for {
		changed := *b.changed.Load()
		if b.opens.Load() != opens || !b.closed.Load() {
			return ticket{}, refused // opened here meanwhile: its own probe decides
		}
		p := b.elsewhere.Load()
		if p == nil || !b.heldElsewhere() {
			return b.ramp(ctx, opens, refused)
		}
		now := time.Now()
		if !now.Before(giveUp) {
			return ticket{}, refused
		}
		timer := time.NewTimer(min(p.until.Sub(now), giveUp.Sub(now)))
		select {
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ticket{}, refused
		}
		timer.Stop()
	}
}

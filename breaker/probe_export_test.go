package breaker

// Hooks into the active probe (StartProbing), for the tests of package
// breaker_test: they take the probe slot by hand, as StartProbing's timer
// does.

// Probe is what StartProbing's timer does when a probe is due: it takes
// the half-open probe slot.
func (b *Breaker) Probe() (Ticket, error) { return b.probe() }

// ErrNotOpen is what Probe returns when there is nothing to probe.
var ErrNotOpen = errNotOpen

// ProbingStoppedForTest reports whether b's active probe, started by
// StartProbing, has been stopped (by its stop, or because stop was
// collected); true when none was started.
func ProbingStoppedForTest(b *Breaker) bool {
	p := b.prober.Load()
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.send == nil
}

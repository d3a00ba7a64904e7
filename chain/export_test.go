package chain

// Hooks into what a chain runs between calls, for the tests of package
// chain_test.

// ProbesStoppedForTest returns a function that reports whether every
// active probe of c (Target.Probe) has been stopped, by Close or because
// c was collected. It holds c's probers, never c itself, so that c can be
// collected while a test asks.
func ProbesStoppedForTest(c *Chain) func() bool {
	var probers []*prober
	for _, t := range c.targets {
		if t.prober != nil {
			probers = append(probers, t.prober)
		}
	}
	return func() bool {
		for _, p := range probers {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if !closed {
				return false
			}
		}
		return true
	}
}

//go:build race

package chain_test

// raceEnabled reports whether the race detector is on: it changes what
// allocates (sync.Pool drops its items at random), so the allocation
// tests do not run under it.
const raceEnabled = true

//go:build !race

package storm

// raceEnabled is true under the race detector, which makes every request
// about ten times slower: the heavy scenarios run less virtual time.
const raceEnabled = false

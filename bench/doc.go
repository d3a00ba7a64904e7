// Package bench holds benchmarks that compare backstop with other libraries.
// It is a module of its own so that the baselines (failsafe-go) never enter
// the library's go.mod. Run from the repository root:
//
//	go -C bench test -run '^$' -bench . -benchmem -count 6 | tee /tmp/bench.txt
//
// and read the ratios as docs/performance.md explains.
package bench

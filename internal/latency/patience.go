package latency

// Patience: how long a target's attempt may go unanswered before the
// chain races it with a later target (chain.Target.Patience). It is a
// hedge delay learned from the target's own answer times: the chain runs
// the race, arms it only when the attempt's hard limit and the call's
// deadline leave room, and records the times in the Windows read here.

import "time"

// The floors of a learned patience, and how it is read from a target's
// answer times. docs/concepts.md gives each its reason and the figure
// that chose it.
const (
	// patienceFloor is the least patience for a whole answer. Thirty
	// seconds: a silent primary with a healthy fallback is served within
	// 35 s, and a long answer still arriving keeps its attempt.
	patienceFloor = 30 * time.Second
	// streamPatienceFloor is the least patience for a stream's first
	// chunk: a first token 20 s away is raced at 10 s and served by the
	// next target at once, while the slow one keeps its chance.
	streamPatienceFloor = 10 * time.Second
	// patienceFactor times the target's p99 answer time (or first-chunk
	// time), once it has MinSamples of them, is its learned patience when
	// that is longer than the floor: a reasoning model whose first token
	// takes 12 s at p99 is raced only after 24 s.
	patienceFactor   = 2
	patienceQuantile = 0.99
)

// Patience returns a target's patience: how long its attempt may go
// without answering (stream: without its first chunk) before the same
// request is raced at a later target. It is set when set is positive (the
// target's configured patience). Otherwise it is learned from w, the
// target's latest answer times (stream: times to the first chunk): twice
// their p99 once w holds MinSamples, and never less than 30 s for a whole
// answer, or 10 s for a first chunk.
func Patience(set time.Duration, w *Window, stream bool) time.Duration {
	if set > 0 {
		return set
	}
	floor := patienceFloor
	if stream {
		floor = streamPatienceFloor
	}
	if q, ok := w.Quantile(patienceQuantile); ok {
		return max(floor, patienceFactor*q)
	}
	return floor
}

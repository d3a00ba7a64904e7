// Package cost prices what model calls spend. It owns the unit (Money:
// exact sums of US dollars, in nanodollars, so that replicas can add them
// atomically on Redis), the Cost of an attempt or a call (Of: the usage a
// provider reported, at a catalogue price, cache reads and writes priced
// as such), the most an attempt may cost before it is sent (WorstCase:
// its estimated prompt and its output limit at the target's prices), and
// the key a caller puts on a context to say whose money a call spends
// (WithKey, Key), which money budgets and the cost metric read.
//
// An unknown price is never read as free: a Cost whose tokens include
// some at an unknown price says so (Unpriced), and its Spent is then what
// the known prices account for, a lower bound.
package cost

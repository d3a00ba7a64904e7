package chain

// Prompt caches: which target holds a conversation's cached prefix
// (internal/affinity), a spreading tier's ranking that keeps the
// conversation there while it is healthy, and what leaving it cost.

import (
	"time"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/affinity"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/policy"
)

// prefixHashed, when set (by the tests), is called each time a call
// hashes its conversation's prefix.
var prefixHashed func()

// warmTable returns c's memory of prompt caches, made on the first answer
// that reports cache tokens: a chain whose answers never do keeps none,
// and hashes nothing.
func (c *Chain) warmTable() *affinity.Table {
	if tab := c.warm.Load(); tab != nil {
		return tab
	}
	tab := affinity.New()
	if !c.warm.CompareAndSwap(nil, tab) {
		return c.warm.Load()
	}
	return tab
}

// prefix returns the key of the call's conversation in tab, hashed once
// per call.
func (w *walk) prefix(tab *affinity.Table) uint64 {
	if !w.keyed {
		w.key, w.keyed = tab.Key(w.call), true
		if prefixHashed != nil {
			prefixHashed()
		}
	}
	return w.key
}

// affine puts first, in the tier at pos that the walk has just ranked,
// the target holding the call's prompt cache, when it is healthy (its
// policies would admit an attempt: gate and breaker open) and the request
// costs no more there than on the strategy's own first, or its second
// when it drew the warm target (its cached tokens at its CacheRead price,
// against the same tokens at the other's Input price; a target warm too
// was compared already: when two targets of the tier hold it, the
// cheaper wins). Unknown prices keep the warm target.
func (w *walk) affine(pos int, tab *affinity.Table) {
	c := w.c
	g := c.targets[pos].group // pos starts the tier: its chain position is its layout position
	e := tab.Visit(w.prefix(tab), 0, 0, c.clock())
	n := 0
	for i := range e {
		n = max(n, e[i].Tokens)
	}
	if n == 0 {
		return
	}
	best, bestCost := -1, cost.Cost{}
	for i := range e {
		s := &e[i]
		if s.Tokens == 0 || s.Target < g.Lo || s.Target >= g.Hi {
			continue
		}
		t := c.targets[s.Target]
		if w.triedAsHedge(t) || w.consult(t, policy.Peek, 1, nil, nil).Err != nil {
			continue
		}
		if at := readAt(t, n, s.Tokens); best < 0 || cheaper(at, bestCost) {
			best, bestCost = s.Target, at
		}
	}
	if best < 0 {
		return // not warm in this tier, or not healthy: the strategy's order stands
	}
	// Against the strategy's first, or its second when it drew the warm
	// target itself: a cold target where the request costs less keeps
	// the strategy's order, unmarked.
	other := w.target(pos)
	if other.ob.Index == best {
		other = w.target(pos + 1) // a tier that spreads has two targets or more
	}
	if !warmOn(&e, other.ob.Index) && cheaper(readAt(other, n, 0), bestCost) {
		return
	}
	w.rank.Prefer(pos, best)
}

// warmOn reports whether target (an index) holds one of e's slots.
func warmOn(e *affinity.Entry, target int) bool {
	for i := range e {
		if e[i].Tokens > 0 && e[i].Target == target {
			return true
		}
	}
	return false
}

// readAt is what reading a prompt of n tokens costs on t when cached of
// them are in its cache.
func readAt(t *target, n, cached int) cost.Cost {
	return cost.Of(llm.Usage{InputTokens: n, CacheReadTokens: min(cached, n)}, catalog.Price{Input: t.Price.Input, CacheRead: t.Price.CacheRead})
}

// cheaper reports whether a costs less than b, both priced.
func cheaper(a, b cost.Cost) bool { return !a.Unpriced && !b.Unpriced && a.Spent < b.Spent }

// bill completes c, what an answer of t with usage u cost, with what
// leaving a warm prompt cache added (prompt), and returns it with the
// warm target left. The chain's memory of prompt caches is asked only
// when the answer reports cache tokens or something is warm: a chain
// whose answers never report any pays one atomic load.
func (w *walk) bill(t *target, u *llm.Usage, c cost.Cost, now time.Duration) (cost.Cost, *target) {
	if u.CacheReadTokens+u.CacheWriteTokens <= 0 && w.c.warm.Load() == nil {
		return c, nil
	}
	left := w.prompt(t, *u, &c, now)
	return c, left
}

// prompt notes the cache tokens of an answer of t (its usage u, at now on
// the chain's clock) in the chain's memory of prompt caches, and prices
// in c what leaving a warm cache added: when another target held the
// conversation's cached prefix, the tokens of it t did not read from its
// own cache, at t's Input price less the warm target's CacheRead price
// (cost.Cost.CacheLost). It returns the warm target left; nil when none
// was, or either price is unknown. A chain of one target, or one whose
// answers never reported cache tokens, does nothing here.
func (w *walk) prompt(t *target, u llm.Usage, c *cost.Cost, now time.Duration) *target {
	tab := w.c.warm.Load()
	cached := u.CacheReadTokens + u.CacheWriteTokens
	if tab == nil {
		if cached <= 0 || len(w.c.targets) < 2 {
			return nil
		}
		tab = w.c.warmTable()
	}
	e := tab.Visit(w.prefix(tab), t.ob.Index, cached, now)
	var warm *affinity.Slot
	for i := range e {
		s := &e[i]
		if s.Tokens > 0 && s.Target != t.ob.Index && (warm == nil || s.Tokens > warm.Tokens) {
			warm = s
		}
	}
	if warm == nil {
		return nil
	}
	lost := warm.Tokens - u.CacheReadTokens
	if lost <= 0 {
		return nil
	}
	left := w.c.targets[warm.Target]
	full := cost.Of(llm.Usage{InputTokens: lost}, catalog.Price{Input: t.Price.Input})
	read := cost.Of(llm.Usage{InputTokens: lost, CacheReadTokens: lost}, catalog.Price{CacheRead: left.Price.CacheRead})
	if full.Unpriced || read.Unpriced || full.Spent <= read.Spent {
		return nil
	}
	c.CacheLost = full.Spent - read.Spent
	return left
}

// lostReason is the record's word for a cache lost on left.
func lostReason(left *target) string { return "cache lost on " + left.Name }

package chain_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/spread"
)

// prefixTokens is the cached prefix of every conversation of these tests.
const prefixTokens = 10_000

// cacher is a deployment with a prompt cache, as providers report it: the
// first request of a conversation (its first message) writes the prefix,
// each later one reads it. A cacher that is not caching reports no cache
// tokens; one that is down fails with 529.
type cacher struct {
	name    string
	caching bool
	down    atomic.Bool
	mu      sync.Mutex
	seen    map[string]bool
	served  int
}

func (p *cacher) Name() string { return p.name }

func (p *cacher) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	if p.down.Load() {
		return nil, &llm.Error{Provider: p.name, Status: 529, Kind: llm.KindOverloaded}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.served++
	u := llm.Usage{InputTokens: prefixTokens + 100*len(req.Messages), OutputTokens: 50}
	if p.caching {
		if p.seen[req.Messages[0].Content] {
			u.CacheReadTokens = prefixTokens
		} else {
			u.CacheWriteTokens = prefixTokens
		}
		if p.seen == nil {
			p.seen = map[string]bool{}
		}
		p.seen[req.Messages[0].Content] = true
	}
	return &llm.Response{Text: "ok", Model: req.Model, Usage: u}, nil
}

// conversation is a conversation's request at turn n: the same first
// message, a turn more each time.
func conversation(first string, n int) llm.Request {
	req := llm.Request{System: "you answer from the document", Messages: []llm.Message{{Role: llm.RoleUser, Content: first}}}
	for range n {
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: "ok"}, llm.Message{Role: llm.RoleUser, Content: "and?"})
	}
	return req
}

// deploys builds a chain spreading over ps with s, each target priced by
// price, opening its breaker at its first failure for 10s.
func deploys(t *testing.T, s spread.Strategy, price map[string]catalog.Price, ps ...*cacher) *chain.Chain {
	t.Helper()
	b := chain.New("cached").Spread(s)
	for i, p := range ps {
		tg := chain.Target{Name: p.name, Provider: p, Model: "sonnet-5", Price: price[p.name], Retry: retry.Policy{MaxAttempts: 1},
			Breaker: breaker.Config{ConsecutiveFailures: 1, FirstOpenFor: 10 * time.Second, OpenFor: 10 * time.Second}}
		if i == 0 {
			b.Primary(tg)
		} else {
			b.OrDeployment(tg)
		}
	}
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// served returns the attempt that served res.
func servedBy(t *testing.T, res *chain.Result, err error) chain.Attempt {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	a := res.Attempts[len(res.Attempts)-1]
	if a.Decision != chain.DecisionServed {
		t.Fatalf("the last attempt did not serve: %v", res.Attempts)
	}
	return a
}

// TestAffinityKeepsAConversationOnItsWarmDeployment: under LeastLoaded and
// Weighted, ten turns of a conversation stay on the deployment that
// cached its prefix at the first, and each record says why; nothing is
// lost.
func TestAffinityKeepsAConversationOnItsWarmDeployment(t *testing.T) {
	for _, s := range []spread.Strategy{spread.LeastLoaded, spread.Weighted} {
		t.Run(s.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ps := []*cacher{{name: "eu-1", caching: true}, {name: "eu-2", caching: true}, {name: "eu-3", caching: true}}
				c := deploys(t, s, map[string]catalog.Price{"eu-1": dear, "eu-2": dear, "eu-3": dear}, ps...)
				res, err := c.Call(t.Context(), conversation("doc A", 0))
				warm := servedBy(t, res, err).Target
				for n := 1; n < 10; n++ {
					time.Sleep(30 * time.Second)
					res, err := c.Call(t.Context(), conversation("doc A", n))
					a := servedBy(t, res, err)
					if a.Target != warm || a.Choice == nil || !a.Choice.Affinity || a.Cost.CacheLost != 0 {
						t.Fatalf("turn %d: %v, cost %v; want %s, ranked first for its cache", n+1, a, a.Cost, warm)
					}
				}
				for _, p := range ps {
					if p.name != warm && p.served != 0 {
						t.Errorf("%s served %d turns of a conversation warm on %s", p.name, p.served, warm)
					}
				}
			})
		})
	}
}

// TestAFailoverFromAWarmDeploymentRecordsTheCacheLostAndReturns: the warm
// deployment fails and its breaker opens; the other deployment, whose
// input costs more than the warm cache read, serves, and its record says
// what the lost cache added. Once the breaker's probe closed it, the
// conversation returns to the warm deployment, where it is cheaper; a
// deployment cheaper than the cache keeps its calls.
func TestAFailoverFromAWarmDeploymentRecordsTheCacheLostAndReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		warm, cold := &cacher{name: "eu-1", caching: true}, &cacher{name: "eu-2"}
		cheapCache := catalog.Price{Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25}
		dearInput := catalog.Price{Input: 1, Output: 5} // no cache: its input costs more than eu-1's cache read
		c := deploys(t, spread.LeastLoaded, map[string]catalog.Price{"eu-1": cheapCache, "eu-2": dearInput}, warm, cold)
		for n := 0; warm.served == 0; n++ { // until eu-1 took a turn: eu-2 caches nothing
			if n == 50 {
				t.Fatal("eu-1 never drawn")
			}
			_, err := c.Call(t.Context(), conversation("doc A", 0))
			if err != nil {
				t.Fatal(err)
			}
		}
		warm.down.Store(true)
		// What eu-2 adds for the 10,000 tokens eu-1 had cached: $1 a
		// million at its Input price, against $0.50 at eu-1's CacheRead.
		lost := cost.Dollars(prefixTokens * (1 - 0.5) / 1e6)
		for turn := 1; turn <= 3; turn++ { // eu-1 fails once (its breaker opens), then is passed over
			res, err := c.Call(t.Context(), conversation("doc A", turn))
			a := servedBy(t, res, err)
			if a.Target != "eu-2" || a.Cost.CacheLost != lost || a.Reason != "cache lost on eu-1" || res.Cost().CacheLost != lost {
				t.Fatalf("turn %d: %v, cost %v; want eu-2, %v lost on eu-1", turn, res.Attempts, a.Cost, lost)
			}
			if turn == 1 && (res.Attempts[0].Target != "eu-1" || !res.Attempts[0].Choice.Affinity) {
				t.Fatalf("turn 1 did not try the warm eu-1 first: %v", res.Attempts)
			}
		}
		warm.down.Store(false)
		time.Sleep(11 * time.Second) // eu-1's breaker lets a probe through
		// Half-open is not healthy yet: the strategy's draw sends eu-1 its
		// probe (a call of this or any conversation), which closes it.
		turn := 4
		for before := warm.served; warm.served == before; turn++ {
			if turn == 50 {
				t.Fatal("eu-1 was never probed")
			}
			if _, err := c.Call(t.Context(), conversation("doc A", turn)); err != nil {
				t.Fatal(err)
			}
		}
		for end := turn + 6; turn < end; turn++ {
			res, err := c.Call(t.Context(), conversation("doc A", turn))
			a := servedBy(t, res, err)
			if a.Target != "eu-1" || !a.Choice.Affinity || a.Cost.CacheLost != 0 || len(res.Attempts) != 1 {
				t.Fatalf("turn %d after recovery: %v; want eu-1, warm and cheaper", turn, res.Attempts)
			}
		}

		// A deployment whose input costs less than the warm cache read
		// keeps the strategy's draw.
		c = deploys(t, spread.LeastLoaded, map[string]catalog.Price{"eu-1": cheapCache, "eu-2": {Input: 0.1, Output: 1}}, warm, cold)
		for range 20 {
			res, err := c.Call(t.Context(), conversation("doc A", 1))
			if a := servedBy(t, res, err); a.Choice.Affinity {
				t.Fatalf("the warm deployment was preferred where it costs more: %v", a)
			}
		}
	})
}

// TestAnOrderedFailoverToAnotherProviderRecordsTheCacheLost: the primary
// held the conversation's cache; it fails, the other provider serves, and
// the record, the call's cost and the observers carry what that added.
func TestAnOrderedFailoverToAnotherProviderRecordsTheCacheLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		primary, other := &cacher{name: "anthropic", caching: true}, &cacher{name: "openai", caching: true}
		var ends []cost.Cost
		c, err := chain.New("ordered").Observe(&observe.Funcs{OnAttemptEnd: func(e observe.AttemptEnd) { ends = append(ends, e.Cost) }}).
			Primary(chain.Target{Name: "sonnet", Provider: primary, Model: "claude-sonnet-5", Price: dear, Retry: retry.Policy{MaxAttempts: 1}}).
			OrProvider(chain.Target{Name: "gpt", Provider: other, Model: "gpt-5", Price: cheap}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), conversation("doc A", 0))
		if a := servedBy(t, res, err); a.Target != "sonnet" || a.Cost.CacheLost != 0 {
			t.Fatalf("first turn: %v", a)
		}
		primary.down.Store(true)
		ends = nil
		res, err = c.Call(t.Context(), conversation("doc A", 1))
		a := servedBy(t, res, err)
		// gpt wrote the prefix to its own cache: 10,000 tokens it read at
		// $1 a million (its Input) that sonnet would have read at $0.50.
		lost := cost.Dollars(prefixTokens * (1 - 0.5) / 1e6)
		if a.Target != "gpt" || a.Choice != nil || a.Cost.CacheLost != lost || a.Reason != "cache lost on sonnet" {
			t.Fatalf("the failover: %v, cost %v; want %v lost on sonnet", a, a.Cost, lost)
		}
		if got := res.Cost(); got.CacheLost != lost || got.String() != a.Cost.String() {
			t.Errorf("Result.Cost = %v", got)
		}
		if len(ends) != 2 || ends[1].CacheLost != lost {
			t.Errorf("observers saw %v", ends)
		}
		// Next turn: gpt is warm now, and sonnet still down: the cache gpt
		// wrote is read, sonnet's is still lost.
		res, err = c.Call(t.Context(), conversation("doc A", 2))
		if a := servedBy(t, res, err); a.Target != "gpt" || a.Cost.CacheLost != 0 {
			t.Errorf("the turn after: %v, cost %v; want gpt reading its own cache", a, a.Cost)
		}
	})
}

// TestAChainWithoutCacheTokensHashesNothing: a chain whose answers report
// no cache tokens never hashes a prefix, spreading or not; the first
// answer that reports some starts it.
func TestAChainWithoutCacheTokensHashesNothing(t *testing.T) {
	var hashes atomic.Int64
	chain.OnPrefixHash(func() { hashes.Add(1) })
	defer chain.OnPrefixHash(nil)
	plain := []*cacher{{name: "eu-1"}, {name: "eu-2"}}
	for _, s := range []spread.Strategy{spread.Ordered, spread.LeastLoaded} {
		c := deploys(t, s, nil, plain...)
		for n := range 20 {
			if _, err := c.Call(t.Context(), conversation("doc A", n)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := hashes.Load(); n != 0 {
		t.Fatalf("a chain without cache tokens hashed %d prefixes", n)
	}
	c := deploys(t, spread.LeastLoaded, nil, &cacher{name: "eu-1", caching: true}, &cacher{name: "eu-2", caching: true})
	for n := range 3 {
		if _, err := c.Call(t.Context(), conversation("doc A", n)); err != nil {
			t.Fatal(err)
		}
	}
	if n := hashes.Load(); n != 3 {
		t.Fatalf("a chain with cache tokens hashed %d prefixes in 3 calls; want one a call", n)
	}
}

package chain_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
)

// Found in review (issue 12, item 7): remembering a served answer in a
// remote store was a write on the call's path: with Redis paused, every
// served call waited for the store's Timeout before it returned. The
// answer is now written behind the call.
func TestLastGoodRememberAddsNoLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 50 * time.Millisecond
		store, err := redisstore.NewCache(redistest.SilentClient(t, nil), redisstore.CacheConfig{Timeout: timeout, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		c, err := chain.New("support").
			Primary(chain.Target{Name: "primary", Provider: &flaky{name: "anthropic"}, Model: "claude"}).
			OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			start := time.Now()
			res, err := c.Call(context.Background(), ask)
			if err != nil || res.Served.Target != "primary" {
				t.Fatalf("call %d: served by %q, err %v; want the primary", i, res.Served.Target, err)
			}
			if d := time.Since(start); d != 0 {
				t.Fatalf("call %d, the provider answering at once: the call took %v of virtual time; want none (remembering must not wait on the store)", i, d)
			}
		}
		// Flush waits for the writes: the first one's Timeout (the others
		// fail at once, Redis being left alone), and says none landed.
		start := time.Now()
		err = c.Flush(context.Background())
		if d := time.Since(start); d != timeout || !errors.Is(err, cache.ErrUnavailable) || !strings.Contains(err.Error(), "3 answers were not remembered") {
			t.Fatalf("Flush = %v after %v; want, after the first write's Timeout (%v), an error matching cache.ErrUnavailable counting 3 answers", err, d, timeout)
		}
	})
}

// Flush waits for the answers written behind the calls: after it, the
// answer is in Redis, and the chain serves it when every model fails.
func TestLastGoodFlushWritesToRedis(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		client, _ := redistest.CountedClient(t, m.Addr())
		store, err := redisstore.NewCache(client, redisstore.CacheConfig{Timeout: sharedTestTimeout})
		if err != nil {
			t.Fatal(err)
		}
		p := &flaky{name: "anthropic"}
		c, err := chain.New("support").
			Primary(chain.Target{Name: "primary", Provider: p, Model: "claude", Retry: retry.Policy{MaxAttempts: 1}}).
			OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(context.Background(), ask); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(context.Background()); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if keys := m.Keys(); len(keys) != 1 || !strings.HasPrefix(keys[0], "backstop:lastgood:") { // redisstore's default Prefix
			t.Fatalf("keys in Redis after Flush: %q; want the remembered answer", keys)
		}
		p.mode.Store(overloaded)
		res, err := c.Call(context.Background(), ask)
		if err != nil || !res.Degraded || res.Text != "ok from anthropic" {
			t.Fatalf("with the primary failing: %+v, %v; want the remembered answer", res, err)
		}
		if err := c.Flush(context.Background()); err != nil {
			t.Fatalf("a second Flush, nothing pending: %v", err)
		}
	})
}

// tenantChain is a chain whose primary answers with the System prompt it
// was given until down is set, then fails; LastGood remembers in a memory
// store.
func tenantChain(t *testing.T, down *bool, key func(context.Context, string, llm.Request) string) *chain.Chain {
	t.Helper()
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 100, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p := &stub{name: "p", fn: func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if *down {
			return nil, &llm.Error{Provider: "p", Status: 401, Kind: llm.KindAuth}
		}
		return &llm.Response{Text: "answer under " + req.System}, nil
	}}
	c, err := chain.New("support").
		Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
		OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store, Key: key})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func askAs(system, q string) llm.Request {
	return llm.Request{System: system, Messages: []llm.Message{{Role: llm.RoleUser, Content: q}}}
}

type tenantKey struct{}

// TestLastGoodContextKeyReadsTheContext: LastGoodConfig.Key gets the
// call's context, when remembering and when recalling.
func TestLastGoodContextKeyReadsTheContext(t *testing.T) {
	down := false
	c := tenantChain(t, &down, func(ctx context.Context, name string, req llm.Request) string {
		tenant, _ := ctx.Value(tenantKey{}).(string)
		return cache.Key(name, tenant, req.Messages[0].Content)
	})
	a := context.WithValue(context.Background(), tenantKey{}, "a")
	b := context.WithValue(context.Background(), tenantKey{}, "b")
	if _, err := c.Call(a, askAs("", "refund?")); err != nil {
		t.Fatal(err)
	}
	down = true
	if res, err := c.Call(b, askAs("", "refund?")); err == nil {
		t.Errorf("tenant b was served %q", res.Text)
	}
	if res, err := c.Call(a, askAs("", "refund?")); err != nil || !res.Degraded {
		t.Errorf("tenant a: %v", err)
	}
}

// A LastGood renamed with degrade.Named is still bound to the chain: it
// remembers the chain's answers and serves them under its new name, with
// their age.
func TestNamedLastGoodRemembersAndServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := false
		store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 100, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		p := &stub{name: "p", fn: func(context.Context, llm.Request) (*llm.Response, error) {
			if down {
				return nil, &llm.Error{Provider: "p", Status: 401, Kind: llm.KindAuth}
			}
			return &llm.Response{Text: "fresh"}, nil
		}}
		c, err := chain.New("support").
			Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
			OrDegrade(degrade.Named("memo", degrade.LastGood(degrade.LastGoodConfig{Store: store}))).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(t.Context(), ask); err != nil {
			t.Fatal(err)
		}
		down = true
		time.Sleep(time.Minute)
		res, err := c.Call(t.Context(), ask)
		if err != nil || !res.Degraded || res.Text != "fresh" || res.Served.Target != "memo" || res.Age != time.Minute {
			t.Fatalf("%+v, %v; want the remembered answer, served by memo, a minute old", res, err)
		}
	})
}

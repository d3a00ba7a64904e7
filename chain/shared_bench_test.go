package chain_test

import (
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// BenchmarkSharedCall measures what Builder.Shared adds to a healthy call
// (a provider answering at once, so that the chain's own cost is all there
// is) on a loopback Redis: "local" is the baseline, no Shared; "shared"
// is every default (the chain's poller reads the breakers and gates every
// DefaultSharedRefresh, 100ms; the first call waits for its first read);
// "refresh" sets Refresh: 100ms, the same since the default became the
// poller, kept so that earlier runs compare; "redis-down" is Shared on an
// address where nothing listens (the first call waits for the poller's
// read to time out, the rest decide locally). Compare the ns/op of each
// against "local" in the same run.
func BenchmarkSharedCall(b *testing.B) {
	addr := redistest.Addr(b)
	prefix := strings.TrimSuffix(redistest.Prefix(b), ":")
	build := func(b *testing.B, addr string, opts *chain.SharedConfig) *chain.Chain {
		bl := chain.New("bench")
		if opts != nil {
			c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
			b.Cleanup(func() { _ = c.Close() })
			bl.Shared(sharedStore(b, c), *opts)
		}
		c, err := bl.Primary(chain.Target{Name: "primary", Provider: &flaky{name: "anthropic"}, Model: "m"}).Build()
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(c.Close) // its poller, before its client closes
		return c
	}
	for _, bc := range []struct {
		name string
		addr string
		opts *chain.SharedConfig
	}{
		{"local", addr, nil},
		{"shared", addr, &chain.SharedConfig{Prefix: prefix}},
		{"refresh", addr, &chain.SharedConfig{Prefix: prefix, Refresh: 100 * time.Millisecond}},
		{"redis-down", "127.0.0.1:1", &chain.SharedConfig{Prefix: prefix, ProbeEvery: time.Hour}},
	} {
		c := build(b, bc.addr, bc.opts)
		b.Run(bc.name, func(b *testing.B) {
			ctx := b.Context()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Call(ctx, ask); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(bc.name+"-parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.Call(b.Context(), ask); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

package chain_test

import (
	"context"
	"testing"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/spend"
)

// TestSharedSpendCostsTwoRoundTripsPerAttempt: a money budget kept on
// Redis costs a healthy call two round trips (the reservation, the
// settlement), and the key's spend on Redis is what the calls cost.
// Real Redis, real time: a round trip is not durably blocking.
func TestSharedSpendCostsTwoRoundTripsPerAttempt(t *testing.T) {
	client := redistest.Client(t)
	store, err := redisstore.New(client)
	if err != nil {
		t.Fatal(err)
	}
	shared, err := spend.NewShared(store.Spend(redistest.Prefix(t)), spend.SharedConfig{})
	if err != nil {
		t.Fatal(err)
	}
	b := newBudget(t, spend.Config{Name: "tenants", Limit: cost.Dollar, Store: shared})
	u := llm.Usage{InputTokens: 1000, OutputTokens: 100}
	c, err := chain.New("c").Spend(b).Primary(chain.Target{Name: "p", Provider: &stub{name: "a", fn: used(u)}, Model: "m", Price: cheap}).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := cost.WithKey(context.Background(), "tenant-42")
	if _, err := c.Call(ctx, question); err != nil { // loads the scripts
		t.Fatal(err)
	}
	h := &redistest.Commands{}
	client.AddHook(h)
	const calls = 10
	for range calls {
		if _, err := c.Call(ctx, question); err != nil {
			t.Fatal(err)
		}
	}
	if n := h.N.Load(); n != 2*calls {
		t.Errorf("%d calls sent %d commands to Redis; want 2 per call", calls, n)
	}
	spent, reserved, err := b.Used(ctx, "tenant-42")
	if want := 11 * cost.Of(u, cheap).Spent; err != nil || spent != want || reserved != 0 {
		t.Errorf("Used = %v spent, %v reserved, %v; want %v, 0", spent, reserved, err, want)
	}
}

package chain_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
)

// tenantChain is a chain whose primary answers with the System prompt it
// was given until down is set, then fails; LastGood remembers in a memory
// store.
func tenantChain(t *testing.T, down *bool, opts ...chain.LastGoodOption) *chain.Chain {
	t.Helper()
	store, err := cache.NewMemory(100, time.Hour)
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
		OrDegrade(chain.LastGood(store, opts...)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func askAs(system, q string) llm.Request {
	return llm.Request{System: system, Messages: []llm.Message{{Role: llm.RoleUser, Content: q}}}
}

// TestLastGoodKeyCoversTheCallersSystem: the same words under another
// System prompt (another tenant's) were served the first tenant's
// remembered answer.
func TestLastGoodKeyCoversTheCallersSystem(t *testing.T) {
	down := false
	c := tenantChain(t, &down)
	ctx := context.Background()
	if _, err := c.Call(ctx, askAs("tenant A", "refund?")); err != nil {
		t.Fatal(err)
	}
	down = true
	res, err := c.Call(ctx, askAs("tenant B", "refund?"))
	if !errors.Is(err, chain.ErrExhausted) || !errors.Is(err, chain.ErrNoLastGood) {
		t.Errorf("tenant B got %q, %v; want nothing remembered", res.Text, err)
	}
	res, err = c.Call(ctx, askAs("tenant A", "refund?"))
	if err != nil || !res.Degraded || res.Text != "answer under tenant A" {
		t.Errorf("tenant A got %q, %v; want its own remembered answer", res.Text, err)
	}
}

type tenantKey struct{}

// TestLastGoodContextKeyReadsTheContext: WithContextKey's function gets the
// call's context, when remembering and when recalling.
func TestLastGoodContextKeyReadsTheContext(t *testing.T) {
	down := false
	c := tenantChain(t, &down, chain.WithContextKey(func(ctx context.Context, name string, req llm.Request) string {
		tenant, _ := ctx.Value(tenantKey{}).(string)
		return cache.Key(name, tenant, req.Messages[0].Content)
	}))
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

package degrade_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// model answers until it is down.
type model struct{ down bool }

func (*model) Name() string { return "anthropic" }

func (m *model) Complete(context.Context, llm.Request) (*llm.Response, error) {
	if m.down {
		return nil, &llm.Error{Provider: "anthropic", Status: 529, Kind: llm.KindOverloaded}
	}
	return &llm.Response{Text: "Your order ships today."}, nil
}

type tenant struct{}

// LastGood remembers each tenant's answers apart: Key reads the tenant
// from the call's context. When the model is down, the tenant that asked
// before is served its remembered answer; another is served the Static
// answer after it.
func ExampleLastGood() {
	store, _ := cache.NewMemory(cache.MemoryConfig{})
	m := &model{}
	c, err := chain.New("support").
		Primary(chain.Target{Name: "sonnet", Provider: m, Model: "claude-sonnet-5-5", Retry: retry.Policy{MaxAttempts: 1}}).
		OrDegrade(degrade.LastGood(degrade.LastGoodConfig{
			Store: store,
			Key: func(ctx context.Context, chain string, req llm.Request) string {
				t, _ := ctx.Value(tenant{}).(string)
				return cache.Key(chain, t, req.Messages[len(req.Messages)-1].Content)
			},
		})).
		OrDegrade(degrade.Static(llm.Response{Text: "We are busy; try again shortly."})).
		Build()
	if err != nil {
		panic(err)
	}
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}}
	acme := context.WithValue(context.Background(), tenant{}, "acme")
	globex := context.WithValue(context.Background(), tenant{}, "globex")

	res, _ := c.Call(acme, req)
	fmt.Println(res.Served.Target, res.Text)
	m.down = true
	res, _ = c.Call(acme, req)
	fmt.Println(res.Served.Target, res.Text)
	res, _ = c.Call(globex, req)
	fmt.Println(res.Served.Target, res.Text)
	// Output:
	// sonnet Your order ships today.
	// last-good Your order ships today.
	// static We are busy; try again shortly.
}

// Validate reports a LastGood's problems before Build does.
func ExampleLastGoodConfig_Validate() {
	err := degrade.LastGoodConfig{TTL: -1}.Validate()
	fmt.Println(errors.Is(err, llm.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// degrade: invalid configuration: last-good: Store is nil; pass one, such as cache.NewMemory's or redisstore.NewCache's
	// degrade: invalid configuration: last-good: TTL is -1ns; it must not be negative (0 means the store's default)
}

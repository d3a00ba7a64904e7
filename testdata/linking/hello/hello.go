// Package hello is what both linking fixtures run: a chain on the
// Anthropic adapter and the fake provider, one call, its answer printed.
// It imports nothing of Redis, so that whether a fixture links go-redis is
// its own doing.
package hello

import (
	"context"
	"fmt"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
)

// Run adds a primary target on the fake provider to b, builds the chain
// and makes one call.
func Run(b *chain.Builder) {
	api := fake.New()
	defer api.Close()
	api.Script("claude-sonnet-5-5", fake.Answer("hello"))
	claude, err := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: api.URL(), HTTPClient: api.Client()})
	if err != nil {
		panic(err)
	}
	c, err := b.
		Primary(chain.Target{Name: "sonnet", Provider: claude, Model: "claude-sonnet-5-5"}).
		Build()
	if err != nil {
		panic(err)
	}
	res, err := c.Call(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
}

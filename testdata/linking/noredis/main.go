// Command noredis builds a chain without Redis, on the Anthropic adapter
// and the fake provider, and makes one call: linking_test.go checks that
// its binary does not link go-redis.
package main

import (
	"context"
	"fmt"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
)

func main() {
	api := fake.New()
	defer api.Close()
	api.Script("claude-sonnet-5-5", fake.Answer("hello"))
	claude, err := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: api.URL(), HTTPClient: api.Client()})
	if err != nil {
		panic(err)
	}
	c, err := chain.New("hello").
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

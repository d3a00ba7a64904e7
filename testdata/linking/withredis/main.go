// Command withredis is noredis with its chain shared through Redis
// (redisstore): linking_test.go checks that its binary links go-redis, so
// that the check of noredis cannot pass for want of looking. It makes no
// round trip: it is built, not run.
package main

import (
	"context"
	"fmt"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/redis/go-redis/v9"
)

func main() {
	api := fake.New()
	defer api.Close()
	api.Script("claude-sonnet-5-5", fake.Answer("hello"))
	claude, err := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: api.URL(), HTTPClient: api.Client()})
	if err != nil {
		panic(err)
	}
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	shared, err := redisstore.NewShared(client)
	if err != nil {
		panic(err)
	}
	c, err := chain.New("hello").
		Shared(shared, chain.SharedConfig{}).
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

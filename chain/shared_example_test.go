package chain_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/openai"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
	"github.com/redis/go-redis/v9"
)

// Two replicas of a service share one Redis (here an in-process stand-in):
// when the first one's breaker opens on a failing primary, the second
// skips the primary from its next call on, without sending it a request.
func ExampleBuilder_Shared() {
	srv, _ := miniredis.Run() // your Redis; loopback here
	defer srv.Close()
	claudeAPI, openaiAPI := fake.New(), fake.New()
	claudeAPI.Script("claude-sonnet-5-5", fake.Overloaded())
	openaiAPI.Script("gpt-6.1", fake.Answer("Your order ships today."))

	var clients []*redis.Client
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	replica := func() *chain.Chain {
		client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
		clients = append(clients, client)
		shared, err := redisstore.New(client) // refuses a client without ContextTimeoutEnabled
		if err != nil {
			panic(err)
		}
		claude, _ := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: claudeAPI.URL(), HTTPClient: claudeAPI.Client()})
		gpt, _ := openai.New(openai.Config{APIKey: "key", BaseURL: openaiAPI.URL(), HTTPClient: openaiAPI.Client()})
		c, err := chain.New("support-answer").
			// Timeout defaults to 50ms; this example runs among many tests
			// on a loaded machine, so it waits longer for Redis.
			Shared(shared, chain.SharedConfig{Timeout: time.Second}).
			Primary(chain.Target{Name: "sonnet", Provider: claude, Model: "claude-sonnet-5-5",
				Retry: retry.Policy{MaxAttempts: 1}}).
			OrProvider(chain.Target{Name: "gpt", Provider: gpt, Model: "gpt-6.1"}).
			Build()
		if err != nil {
			panic(err)
		}
		return c
	}
	a, b := replica(), replica()
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}}

	for range 5 { // five failures in a row open replica a's breaker
		a.Call(context.Background(), req)
	}
	// a's poller writes the opening at once, in the background, and b
	// reads it before its next call. Flush waits for that write, so that
	// the output does not depend on which of the two round trips lands
	// first; a service has no need to.
	a.Flush(context.Background())
	res, _ := b.Call(context.Background(), req)
	fmt.Println("replica b:", res.Attempts[0].Reason)
	fmt.Println("served by:", res.Served.Target)
	fmt.Println("requests the primary received:", claudeAPI.Requests("claude-sonnet-5-5"))
	// Output:
	// replica b: circuit breaker open on another replica
	// served by: gpt
	// requests the primary received: 5
}

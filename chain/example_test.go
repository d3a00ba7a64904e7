package chain_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/openai"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/spread"
)

// A chain over two providers. The fake provider stands in for the real APIs:
// the primary is overloaded, so the chain retries it, then moves on.
func Example() {
	claudeAPI, openaiAPI := fake.New(), fake.New()
	claudeAPI.Script("claude-sonnet-5-5", fake.Overloaded())
	openaiAPI.Script("gpt-6.1", fake.Answer("Your order ships today.").RequestID("req_42"))

	claude, _ := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: claudeAPI.URL(), HTTPClient: claudeAPI.Client()})
	gpt, _ := openai.New(openai.Config{APIKey: "key", BaseURL: openaiAPI.URL(), HTTPClient: openaiAPI.Client()})

	c, err := chain.New("support-answer").
		Deadline(30 * time.Second).
		Primary(chain.Target{Name: "sonnet", Provider: claude, Model: "claude-sonnet-5-5",
			Retry: retry.Policy{MaxAttempts: 2, Base: time.Millisecond}}).
		OrProvider(chain.Target{Name: "gpt", Provider: gpt, Model: "gpt-6.1"}).
		OrDegrade(degrade.Static(llm.Response{Text: "We are busy; try again shortly."})).
		Build()
	if err != nil {
		panic(err)
	}
	res, err := c.Call(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Text)
	fmt.Println("served by", res.Served.Target, "("+res.Served.Tier.String()+"), request-id", res.Served.RequestID)
	for _, a := range res.Attempts {
		fmt.Println(a.Target, a.N, a.Status, a.Kind, a.Decision)
	}
	// Output:
	// Your order ships today.
	// served by gpt (provider), request-id req_42
	// sonnet 1 529 overloaded retry
	// sonnet 2 529 overloaded next
	// gpt 1 200 unknown served
}

// Build reports every configuration problem at once, each naming its target.
func ExampleBuilder_Build() {
	claude, _ := anthropic.New(anthropic.Config{APIKey: "key"})
	_, err := chain.New("support-answer").
		Primary(chain.Target{Name: "sonnet", Provider: claude, Model: "claude-sonnet-5-5"}).
		OrDeployment(chain.Target{Name: "sonnet-us", Provider: claude, Model: "claude-haiku-5"}).
		OrSibling(chain.Target{Name: "haiku", Provider: claude}).
		Build()
	fmt.Println(errors.Is(err, llm.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// chain "support-answer": target "sonnet-us": OrDeployment serves model "claude-haiku-5" but the primary serves "claude-sonnet-5-5"; another deployment serves the same model (use OrSibling or OrProvider for another model)
	// chain "support-answer": target "haiku": Model is empty; name the model to request
}

// Decode validates the answer against the chain's Schema and decodes it;
// LastGood serves the last validated answer when every model is down.
func ExampleDecode() {
	api := fake.New()
	claude, _ := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: api.URL(), HTTPClient: api.Client()})
	store, _ := cache.NewMemory(cache.MemoryConfig{})
	c, err := chain.New("order-status").
		Schema([]byte(`{"type": "object", "required": ["status"], "properties": {"status": {"enum": ["shipped", "pending"]}}}`)).
		Primary(chain.Target{Name: "sonnet", Provider: claude, Model: "claude-sonnet-5-5", Retry: retry.Policy{MaxAttempts: 1}}).
		OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).
		Build()
	if err != nil {
		panic(err)
	}
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Status of order 42?"}}}

	api.Script("claude-sonnet-5-5", fake.Answer("Sure:\n```json\n{\"status\": \"shipped\"}\n```"))
	type Status struct{ Status string }
	s, res, err := chain.Decode[Status](context.Background(), c, req)
	fmt.Println(s.Status, res.Served.Target, res.Degraded, err)

	api.Script("claude-sonnet-5-5", fake.Overloaded()) // the model is down now
	s, res, err = chain.Decode[Status](context.Background(), c, req)
	fmt.Println(s.Status, res.Served.Target, res.Degraded, err)
	// Output:
	// shipped sonnet false <nil>
	// shipped last-good true <nil>
}

// A streamed call: the primary fails before its first chunk, so the chain
// falls back; the caller sees one clean answer.
func ExampleChain_Stream() {
	api := fake.New()
	api.Script("claude-sonnet-5-5", fake.Overloaded())
	api.Script("claude-haiku-5", fake.Answer("Your order ships today.").Chunks("Your order ", "ships ", "today."))
	claude, _ := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: api.URL(), HTTPClient: api.Client()})
	c, err := chain.New("support-answer").
		Primary(chain.Target{Name: "sonnet", Provider: claude, Model: "claude-sonnet-5-5", Retry: retry.Policy{MaxAttempts: 1}}).
		OrSibling(chain.Target{Name: "haiku", Provider: claude, Model: "claude-haiku-5"}).
		Build()
	if err != nil {
		panic(err)
	}
	s := c.Stream(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}})
	for chunk, err := range s.Chunks() {
		if err != nil {
			fmt.Println("error:", err)
			break
		}
		fmt.Printf("%q\n", chunk.Text)
	}
	res, _ := s.Result()
	fmt.Println("served by", res.Served.Target)
	// Output:
	// "Your order "
	// "ships "
	// "today."
	// served by haiku
}

// Spread a model's calls over its deployments by their weights (say, by
// the rate limits of each account), and hedge an attempt that has not
// answered within a second with the same request on the next deployment.
// Each attempt's record says which strategy chose its target and why.
func ExampleBuilder_Spread() {
	eu1, eu2 := fake.New(), fake.New()
	eu1.Script("claude-sonnet-5-5", fake.Answer("Your order ships today."))
	eu2.Script("claude-sonnet-5-5", fake.Answer("Your order ships today."))
	deployment := func(f *fake.Server) llm.Provider {
		p, _ := anthropic.New(anthropic.Config{APIKey: "key", BaseURL: f.URL(), HTTPClient: f.Client()})
		return p
	}
	c, err := chain.New("support-answer").
		Spread(spread.Weighted).
		Hedge(hedge.Config{Delay: time.Second}).
		Primary(chain.Target{Name: "eu-1", Provider: deployment(eu1), Model: "claude-sonnet-5-5", Weight: 3}).
		OrDeployment(chain.Target{Name: "eu-2", Provider: deployment(eu2), Model: "claude-sonnet-5-5", Weight: 1}).
		Build()
	if err != nil {
		panic(err)
	}
	ask := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}}
	if res, err := c.Call(context.Background(), ask); err == nil {
		ch := res.Attempts[0].Choice
		fmt.Println(res.Text)
		fmt.Println(ch.Strategy, ch.Rank, "of", ch.Of)
	}
	// Output:
	// Your order ships today.
	// weighted 1 of 2
}

package agent_test

import (
	"context"
	"fmt"
	"log"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
)

// A refund agent: a typed tool marked Once runs once per place in the
// conversation, however often the request is retried.
func ExampleNew() {
	// The model, faked: it calls the refund tool, then answers.
	s := fake.New()
	s.Script("claude-sonnet-5-5",
		fake.CallTools(fake.ToolCall{Name: "refund", Arguments: `{"order_id":"o-1","cents":500}`}),
		fake.Answer("I refunded $5.00 for order o-1."))
	claude, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-example", BaseURL: s.URL(), HTTPClient: s.Client()})
	if err != nil {
		log.Fatal(err)
	}
	c, err := chain.New("support").Primary(chain.Target{Name: "claude", Provider: claude, Model: "claude-sonnet-5-5"}).Build()
	if err != nil {
		log.Fatal(err)
	}

	type Refund struct {
		OrderID string `json:"order_id" jsonschema:"the order to refund"`
		Cents   int    `json:"cents" jsonschema:"the amount, in cents"`
	}
	type Receipt struct {
		RefundID string `json:"refund_id"`
	}
	refund, err := agent.NewTool(agent.ToolConfig{
		Name:        "refund",
		Description: "Refunds an order.",
		Once:        true,
		// Recover answers a refund whose outcome is unknown (its replica
		// died mid-call): look it up by its key, never refund blindly.
		Recover: agent.Func(func(ctx context.Context, in Refund) (Receipt, error) {
			call, _ := agent.CallFrom(ctx)
			return Receipt{RefundID: "looked up by " + call.Key}, nil
		}),
	}, func(ctx context.Context, in Refund) (Receipt, error) {
		call, _ := agent.CallFrom(ctx) // call.Key: the payment API's idempotency key
		fmt.Printf("refunding %d cents on %s (key %s)\n", in.Cents, in.OrderID, call.Key)
		return Receipt{RefundID: "re_1"}, nil
	})
	if err != nil {
		log.Fatal(err)
	}

	loop, err := agent.New(agent.Config{Chain: c, Tools: []agent.Tool{refund}})
	if err != nil {
		log.Fatal(err)
	}
	res, err := loop.Run(context.Background(), agent.Conversation{
		ID:      "ticket-42",
		Request: llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Please refund order o-1."}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, step := range res.Steps {
		for _, c := range step.Calls {
			fmt.Printf("step %d: %s %s -> %s\n", step.Index, c.Call.Name, c.Call.ID, c.Output)
		}
	}
	fmt.Println(res.Text)
	fmt.Println(len(res.Conversation.Messages), "messages to store")
	// Output:
	// refunding 500 cents on o-1 (key ticket-42/1/0)
	// step 1: refund call_1_0 -> {"refund_id":"re_1"}
	// I refunded $5.00 for order o-1.
	// 4 messages to store
}

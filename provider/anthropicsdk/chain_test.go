package anthropicsdk

import (
	"context"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/retry"
)

// TestChain: in a chain, the chain's retry policy is the only one. A
// client built to retry five times, overloaded, is tried twice (two
// requests, not twelve), then the chain moves on to the next target.
func TestChain(t *testing.T) {
	api := fake.New()
	api.Script("claude-primary", fake.Overloaded())
	api.Script("claude-fallback", fake.Answer("Served by the fallback.").RequestID("req_42"))
	client := anthropic.NewClient(option.WithAPIKey(testKey), option.WithBaseURL(api.URL()), option.WithMaxRetries(5))
	p, err := New(client, Config{HTTPClient: api.Client()})
	if err != nil {
		t.Fatal(err)
	}
	c, err := chain.New("sdk").
		Primary(chain.Target{Name: "primary", Provider: p, Model: "claude-primary",
			Retry: retry.Policy{MaxAttempts: 2, Base: time.Millisecond}}).
		OrSibling(chain.Target{Name: "fallback", Provider: p, Model: "claude-fallback"}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "Served by the fallback." || res.Served.Target != "fallback" || res.Served.RequestID != "req_42" {
		t.Errorf("%+v", res)
	}
	if n := api.Requests("claude-primary"); n != 2 {
		t.Errorf("the primary got %d requests; want the chain's 2", n)
	}
	if len(res.Attempts) != 3 || res.Attempts[0].Kind != llm.KindOverloaded || res.Attempts[0].Status != 529 {
		t.Errorf("attempts %+v", res.Attempts)
	}
}

package policy_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

// tokens is a per-target allowance of output tokens: it refuses an attempt
// once the allowance is spent, and counts what each answer used.
type tokens struct {
	mu   sync.Mutex
	left int
}

var errSpent = errors.New("the allowance of output tokens is spent")

func (t *tokens) Admit(_ context.Context, a *policy.Attempt) policy.Admission {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.Phase != policy.Peek && t.left <= 0 {
		return policy.Admission{Err: errSpent, Reason: "token allowance spent", Cause: observe.SkipBudget}
	}
	return policy.Admission{}
}

func (t *tokens) Settle(_ context.Context, _ *policy.Attempt, _ policy.Hold, o *policy.Outcome) {
	if o.Sent && o.Response != nil {
		t.mu.Lock()
		t.left -= o.Response.Usage.OutputTokens
		t.mu.Unlock()
	}
}

// model answers every request, using 100 output tokens.
type model struct{ name string }

func (m model) Name() string { return m.name }

func (m model) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: "hello", Model: req.Model, Usage: llm.Usage{OutputTokens: 100}}, nil
}

// A policy of the user's: a target's allowance of output tokens, asked
// before each attempt after the built-in policies and told how each ended.
// The first call spends the primary's allowance; the second goes to the
// fallback without sending the primary anything.
func Example() {
	allowance := &tokens{left: 1}
	c, err := chain.New("allowance").
		Primary(chain.Target{Name: "sonnet", Provider: model{"anthropic"}, Model: "claude-sonnet-4-5",
			Policies: []policy.Policy{allowance}}).
		OrProvider(chain.Target{Name: "gpt", Provider: model{"openai"}, Model: "gpt-4.1"}).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}
	for range 2 {
		res, err := c.Call(context.Background(), req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res.Served.Target)
	}
	// Output:
	// sonnet
	// gpt
}

package spend_test

import (
	"context"
	"fmt"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/spend"
)

// model answers every request with 2,000 input and 500 output tokens.
type model struct{ name string }

func (m model) Name() string { return m.name }

func (m model) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: "ok", Model: req.Model, Usage: llm.Usage{InputTokens: 2000, OutputTokens: 500}}, nil
}

// A budget of 5 cents per tenant a day, on a chain of a dear model, a
// cheap one and a static answer: as a tenant's spend nears the limit, its
// calls move to the cheaper model whose worst case still fits, then to
// the static answer. Another tenant's calls are not touched. (With Mode:
// spend.Refuse, the fifth call fails instead, with a *spend.ExceededError
// that chain.VerdictOf answers with a 429.)
func Example() {
	tenants, err := spend.New(spend.Config{Name: "tenants", Limit: cost.Dollars(0.05)})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := chain.New("support").Spend(tenants).
		Primary(chain.Target{Name: "dear", Provider: model{"anthropic"}, Model: "big", Price: catalog.Price{Input: 5, Output: 25}}).
		OrProvider(chain.Target{Name: "cheap", Provider: model{"openai"}, Model: "small", Price: catalog.Price{Input: 0.5, Output: 2}}).
		OrDegrade(degrade.Static(llm.Response{Text: "We are busy; please try again tomorrow."})).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}, Params: llm.Params{MaxTokens: 1000}}
	ctx := cost.WithKey(context.Background(), "tenant-42")
	for range 5 {
		res, err := c.Call(ctx, req)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s %v\n", res.Served.Target, res.Cost())
	}
	spent, _, _ := tenants.Used(ctx, "tenant-42")
	fmt.Println("tenant-42 spent", spent)
	res, _ := c.Call(cost.WithKey(context.Background(), "tenant-7"), req)
	fmt.Println("tenant-7:", res.Served.Target)
	// Output:
	// dear $0.0225
	// dear $0.0225
	// cheap $0.002
	// cheap $0.002
	// static $0
	// tenant-42 spent $0.049
	// tenant-7: dear
}

// Package chain owns the fallback chain: the fluent builder that orders
// targets (the primary, the same model on another deployment, a sibling
// model, another provider, then degradations) and the executor that walks
// them for each call, retrying, waiting and moving on as the decision table
// of package retry says.
//
// A chain is built once and called many times, concurrently:
//
//	c, err := chain.New("support-answer").
//		Deadline(45 * time.Second).
//		Primary(chain.Target{Name: "sonnet-eu-1", Provider: eu1, Model: "claude-sonnet-5-5"}).
//		OrDeployment(chain.Target{Name: "sonnet-eu-2", Provider: eu2, Model: "claude-sonnet-5-5"}).
//		OrSibling(chain.Target{Name: "haiku-eu", Provider: eu1, Model: "claude-haiku-5"}).
//		OrProvider(chain.Target{Name: "gpt-eu", Provider: oai, Model: "gpt-6.1"}).
//		OrDegrade(degrade.Static(llm.Response{Text: "We are busy; try again shortly."})).
//		Build()
//	res, err := c.Call(ctx, llm.Request{Messages: msgs})
//
// Every configuration error surfaces at Build, all of them at once, each
// naming its target, and each wrapping llm.ErrInvalidConfig, the module's
// one invalid-configuration sentinel, which every constructor's and
// Validate's errors wrap too. Call never sleeps past the chain's deadline: a wait that
// would end after it is skipped and the chain moves on.
//
// Builder.Shared makes the replicas of a service that build the same chain
// share its breakers, Retry-After gates and retry budgets through Redis.
package chain

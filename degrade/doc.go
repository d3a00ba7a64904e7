// Package degrade owns what a chain answers with once every model target
// has failed: the Degradation interface, and the degradations backstop
// ships: Static (a fixed answer), Func (a function of the request), Named
// (a renamed one) and LastGood (the last answer a model gave to the same
// question, remembered in a cache.Store).
//
// A chain runs its degradations (chain.Builder.OrDegrade) in the order
// added, even after its deadline, each for at most its DegradeTimeout,
// validates what they answer against its Schema and records each attempt;
// that walk is package chain's. What a degradation needs of the chain goes
// through two small interfaces defined here, so that this package knows
// nothing of chain: a Binder is told, once at Build, the name and schema of
// the chain it serves, and a Rememberer (what LastGood's Bind returns) is
// told of every validated answer the chain serves, asked for a remembered
// answer with its age, and flushed by chain.Chain.Flush.
//
//	store, err := cache.NewMemory(cache.MemoryConfig{})
//	...
//	c, err := chain.New("support").
//		Primary(chain.Target{Name: "sonnet", Provider: p, Model: "claude-sonnet-4-5"}).
//		OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: store})).
//		OrDegrade(degrade.Static(llm.Response{Text: "We are busy; try again shortly."})).
//		Build()
package degrade

package budget_test

import (
	"context"
	"log"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/redisstore"
)

// Every replica of a service builds the same Shared budget, on the same
// key, for a target it calls; together they grant that target no more
// retries than one budget allows. The store on Redis is redisstore's; its
// client must bound commands by their context (ContextTimeoutEnabled) so
// that a slow Redis costs a call at most the budget's Timeout.
func ExampleNewShared() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	stores, err := redisstore.New(client)
	if err != nil {
		log.Fatal(err)
	}

	b, err := budget.NewShared(stores.Budget("backstop:budget:support-answer:sonnet-eu-1"), budget.SharedConfig{
		Ratio: budget.RatioConfig{Ratio: 0.1, MinRetries: 10}, // retries <= max(10, 10% of all replicas' first attempts) per 10s
		OnError: func(err error) { // nil when Redis answers again
			if err != nil {
				slog.Warn("retry budget: deciding locally", "error", err)
			}
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Flush(context.Background()) // write the last first attempts counted
	// In a chain: chain.Target{Name: "sonnet-eu-1", Budget: b, ...}.
	_ = b
}

package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
)

// Replicas share their last-known-good answers through Redis. The client
// must bound its commands by their context, so that the store's Timeout
// holds: ContextTimeoutEnabled.
func ExampleNewCache() {
	srv, err := miniredis.Run() // stands in for a real Redis here
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	defer client.Close()

	store, err := redisstore.NewCache(client, redisstore.CacheConfig{
		Prefix:  "support:lastgood:",    // default "backstop:lastgood:"
		TTL:     6 * time.Hour,          // default 24h
		Timeout: 200 * time.Millisecond, // default 50ms
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	key := cache.Key("support-answer", "user", "How do I reset my password?")
	if err := store.Set(ctx, key, cache.Entry{Value: []byte(`{"text":"Use the link."}`)}, 0); err != nil {
		panic(err)
	}
	e, ok, err := store.Get(ctx, key)
	fmt.Println(ok, err, string(e.Value))

	// Redis goes down: calls carry on without the store.
	srv.Close()
	_, ok, err = store.Get(ctx, key)
	fmt.Println(ok, errors.Is(err, cache.ErrUnavailable))
	// Output:
	// true <nil> {"text":"Use the link."}
	// false true
}

func ExampleNewCache_invalid() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"}) // ContextTimeoutEnabled unset
	defer client.Close()
	_, err := redisstore.NewCache(client, redisstore.CacheConfig{})
	fmt.Println(errors.Is(err, llm.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// cache: invalid configuration: redis store: client: ContextTimeoutEnabled is false; set ContextTimeoutEnabled: true in its options, or a slow Redis would hold a call for the client's ReadTimeout instead of the store's Timeout
}

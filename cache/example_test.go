package cache_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/llm"
)

// A chain remembers each validated answer under a key derived from its name
// and the caller's messages, and serves it when every target is down.
func Example() {
	ctx := context.Background()
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 1000, TTL: 6 * time.Hour}) // MemoryConfig{} for 10,000 entries and 24h
	if err != nil {
		panic(err)
	}
	key := cache.Key("support-answer", "user", "How do I reset my password?")

	// A call succeeded: remember its answer.
	answer := []byte(`{"text":"Use the 'Forgot password' link."}`)
	if err := store.Set(ctx, key, cache.Entry{Value: answer}, 0); err != nil {
		panic(err)
	}

	// Later, every model is down: serve the last known good answer.
	e, ok, err := store.Get(ctx, key)
	fmt.Println(ok, err, string(e.Value))

	// Another question has no answer to fall back on.
	_, ok, err = store.Get(ctx, cache.Key("support-answer", "user", "Can I change my email?"))
	fmt.Println(ok, err)

	// The parts are length-prefixed, so moving a boundary changes the key.
	fmt.Println(cache.Key("ab", "c") == cache.Key("a", "bc"))
	// Output:
	// true <nil> {"text":"Use the 'Forgot password' link."}
	// false <nil>
	// false
}

func ExampleNewMemory_invalid() {
	_, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: -1})
	fmt.Println(errors.Is(err, llm.ErrInvalidConfig))
	fmt.Println(err)
	// Output:
	// true
	// cache: invalid configuration: memory store: MaxEntries is -1; it must not be negative (0 means 10000)
}

// Command noredis builds a chain without Redis, on the Anthropic adapter
// and the fake provider, and makes one call (package hello):
// linking_test.go checks that its binary does not link go-redis.
package main

import (
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/testdata/linking/hello"
)

func main() {
	hello.Run(chain.New("hello"))
}

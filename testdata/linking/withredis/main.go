// Command withredis is noredis with its chain shared through Redis
// (redisstore): linking_test.go checks that its binary links go-redis, so
// that the check of noredis cannot pass for want of looking. It makes no
// round trip: it is built, not run.
package main

import (
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/testdata/linking/hello"
	"github.com/redis/go-redis/v9"
)

func main() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	shared, err := redisstore.New(client)
	if err != nil {
		panic(err)
	}
	hello.Run(chain.New("hello").Shared(shared, chain.SharedConfig{}))
}

// Package redisstore owns every line of go-redis code in the module
// (github.com/redis/go-redis/v9): the stores that let the replicas of a
// service share what they learn through a Redis they already run, behind
// interfaces owned by the packages that use them. breaker, budget, cache
// and chain import no Redis client, so a program that builds a chain
// without Redis does not link go-redis; one that imports this package does.
//
//   - Store (New) keeps a chain's shared state on one go-redis client:
//     give it to chain.Builder.Shared. Its Breakers is a breaker.Store
//     (every target's breaker openings and Retry-After gates in one hash)
//     and its Budget a budget.Store (one target's retry budget, one hash of
//     counters per bucket), each round trip one Lua script that reads the
//     Redis server's clock. The logic around them (timeouts, leaving a
//     failed Redis alone, local fallbacks, batching, capping what is read
//     by each replica's own limits) is breaker.Shared's and budget.Shared's.
//     Its Spend is a spend.Store: a money budget's spend and reservations,
//     one hash per budget key and period, for spend.NewShared.
//     Its Ledger is a ledger.Ledger: an agent step's record (started
//     with a lease, or done with its result), one hash per key, for
//     ledger.NewShared.
//   - Cache (NewCache) is a cache.Store of last-known-good answers in
//     Redis, shared between replicas: give it to degrade.LastGood.
//
// Every client must bound its commands by their context, so that the
// Timeouts hold: in go-redis that is Options.ContextTimeoutEnabled (and the
// same field of ClusterOptions, RingOptions, FailoverOptions and
// UniversalOptions). New and NewCache check it on *redis.Client,
// *redis.ClusterClient and *redis.Ring; another implementation of
// redis.UniversalClient must honour deadlines itself. Neither makes a round
// trip: Redis may be down when they are called. Nothing here starts a
// goroutine or holds anything to close: the client is the caller's, to
// share and to close.
//
//	client := redis.NewClient(&redis.Options{Addr: "redis:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.New(client)
//	...
//	lastGood, err := redisstore.NewCache(client, redisstore.CacheConfig{})
//	...
//	c, err := chain.New("support-answer").
//		Shared(store, chain.SharedConfig{}).
//		Primary(...).
//		OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: lastGood})).
//		Build()
//
// go-redis logs what it does not return (a failed dial, a connection
// dropped from its pool) through one process-wide logger, which writes to
// standard error by default. Importing this package replaces it, as the
// program starts, by one that sends each message to slog.Default() as a
// Debug record with the attribute logger=go-redis (see log.go): silent at
// slog's default level. go-redis cannot tell whether a logger was set; a
// redis.SetLogger the program makes in main comes later and wins.
//
// See docs/replicas.md for what is shared, what it costs per call and what
// happens when Redis is slow or down.
package redisstore

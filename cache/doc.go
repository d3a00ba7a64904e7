// Package cache owns the stores of last-known-good answers: the Store
// interface a chain's degradation tier reads and writes, the Entry it keeps,
// Memory (an in-process store on hashicorp/golang-lru/v2), and Key, which
// derives a store key from a chain's name and the caller's messages. The
// store in Redis, shared between replicas, is redisstore.Cache (built by
// redisstore.NewCache): the redisstore package owns every line of the
// module's go-redis code, so this package imports no Redis client.
//
// The chain remembers every answer that passed validation under the call's
// key; when every target of a later call with the same key has failed, it
// serves the remembered answer instead of an error, marked as degraded. The
// store treats the answer as opaque bytes.
//
// Memory keeps at most 10,000 answers for 24h
// by default, evicting the least recently used beyond that. Expiry is
// checked when an entry is read: nothing runs in the background, so a Memory
// starts no goroutine, needs no Close, and runs on a testing/synctest
// bubble's virtual clock when built inside one. (golang-lru's expirable
// package is not used: with a TTL it starts a goroutine per cache that never
// exits, which leaks and makes a testing/synctest bubble panic.)
//
// redisstore.Cache keeps each answer under a prefix ("backstop:lastgood:")
// for 24h by default, expired by Redis itself, so replicas share
// what any of them remembered and nothing lingers. Each Get and Set waits
// for Redis at most the store's Timeout (50ms by default): a Redis that is
// slow or down makes them return an error matching ErrUnavailable, and a
// chain then carries on without the store.
package cache

// Package cache will own the stores of last-known-good answers: in memory
// (on hashicorp/golang-lru/v2, expiry checked on read, no background
// goroutine) and on Redis. It is being built.
package cache

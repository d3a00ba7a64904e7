// Package breaker will own the per-target circuit breakers (on
// github.com/sony/gobreaker/v2), which failures count against a target, and
// the Retry-After gate that closes a target for as long as the provider asked.
// It is being built; until then chains run without breakers.
package breaker

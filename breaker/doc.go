// Package breaker owns what a chain remembers about a failing target between
// calls: a circuit breaker per target (on github.com/sony/gobreaker/v2's
// TwoStepCircuitBreaker, so each attempt of a call reports on its own), and
// the Retry-After gate, which closes a target for as long as its provider
// asked so that concurrent calls skip it instead of each rediscovering the
// 429.
//
// Which failures count against a target comes from the chain's decision
// table (retry.BreakerVerdict): overloads, server errors, timeouts, connection
// errors, auth and not-found count; rate limits, conflicts and bad requests
// do not (the target answered as it should); a spend cap trips the breaker at
// once; a caller's cancellation is not counted at all.
//
// With the zero Config a breaker opens when at least half of at least 20
// attempts in a rolling 10 s window failed (attempts counted as they start,
// failures as they end, so fast failures cannot outrun slow successes), or
// after 5 consecutive failures while the window holds fewer than 20; it
// stays open a fixed 5 s, then lets one probe through: a success closes it,
// a failure opens it again. A larger OpenFor doubles the interval after
// each failed probe, up to OpenFor. Breaker.Wait lets a caller with nowhere
// else to go wait for the probe instead of failing at once.
// Breaker.OpenInterval is the current interval.
//
// Once the interval has passed, the first attempt Allow lets through is
// the probe, so a user's call finds out whether the target recovered. With
// Config.ActiveProbe, Allow refuses users' attempts until the breaker
// closes, and Breaker.StartProbing sends a small probe request of the
// caller's choosing instead, on a timer, when each opening ends
// (Breaker.ProbeAt), until the function it returns stops it.
//
// A spend cap (retry.Trip) opens the breaker with its first failure. That
// leans only on gobreaker's documented contract, not on the order in which
// it calls its callbacks: while the Trip's failure is being reported, the
// breaker's ReadyToTrip (which gobreaker calls whenever a request fails in
// the closed state) answers true.
//
// Shared lets the replicas of a service publish to each other, through a
// Store (Redis: see the redisstore package), that a breaker opened or
// closed and that a gate closed; each replica still runs its own breaker,
// and no lock is held across a model call (see Shared, and
// docs/replicas.md for why gobreaker's DistributedCircuitBreaker is not
// used). The publication plumbing (what a breaker changed, what another
// replica holds open) is Shared's, not Breaker's or Gate's: a chain's
// shared state uses it; a program that only configures breakers never
// sees it. Among replicas sharing a target one probes it: the others hold
// their breakers open on its publication, their own opened or not (see
// Shared.Sync), and Breaker.Wait waits for its probe. This package
// imports no Redis client.
package breaker

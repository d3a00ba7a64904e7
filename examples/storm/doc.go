// Package storm is backstop's storm lab: a test suite that drives many
// virtual clients through real chains (chain.New … Build, the
// provider/anthropic adapter, the fake provider in-process) inside
// testing/synctest bubbles, so that minutes of retry storms run in seconds.
// It prints one table per scenario and asserts each scenario's headline:
//
//	go -C examples/storm test -v -run Storm .
//
// The lab is a module of its own (its go.mod replaces the library with the
// working tree two directories up, as bench/ does), so that the library's
// go test ./... does not run it; .ci/run runs all of it, with and without
// the race detector.
//
// The scenarios, one file each:
//
//   - herd_test.go: 200 clients fail together and retry with a 1 s base;
//     the largest number of arrivals in any 100 ms window, by jitter mode,
//     then with backstop's defaults (budget and breaker on).
//   - contention_test.go: 100 clients contend for a provider that admits
//     one request at a time (the AWS architecture blog's experiment):
//     total calls and time to finish, by jitter mode.
//   - outage_test.go: the primary is down for 10 minutes under steady load
//     while a second tier is healthy: requests sent to the dead primary per
//     call, with no budget, each budget, the breaker, and all together.
//   - ratelimit_test.go: 200 clients calling back to back for 3 minutes
//     against a provider limited to 50 requests per minute that sends the
//     real rate-limit headers: goodput as a share of the provider's capacity
//     and 429s per answer, for a naive loop, an SDK-like loop, backstop's
//     defaults and self-throttling.
//   - layers_test.go: three stacked retry layers around a failing provider
//     against backstop as the single layer: requests per action.
//   - tail_test.go: 4000 open-loop calls over three deployments of one
//     model answering in about a second (lognormal), one of them in 8s for
//     10% of its requests: p50 and p99 call latency and the extra requests
//     hedging costs, without hedging, with an adaptive delay and a fixed
//     one.
//   - spread_test.go: 300 clients calling back to back for 5 minutes
//     against three deployments limited to 30, 60 and 120 requests a
//     minute: goodput as a share of their summed capacity and 429s per
//     answer, spread ordered, weighted and by headroom.
//   - recovery_test.go: one call every 100 ms to a primary-only chain
//     while the primary is down for 1 s, then for 5 minutes: calls failed,
//     how soon after its recovery the primary serves again, and the
//     requests it saw while down, with the fixed 30 s breaker of earlier
//     versions, the growing interval (5 s to 60 s) and an active probe.
//   - defaults_test.go: defaults under fault: a chain of an
//     OpenAI-compatible primary (provider/openai) and an Anthropic fallback
//     with nothing configured, against one fault a row (the faults of
//     issue 24 and of the published crash test of LLM gateways: 429s,
//     5xx, resets, silence, a slow first token, streams cut, stalled,
//     malformed or without [DONE], context length, content filter, a
//     recovered primary): how each call ended, the requests each target
//     received, the wall time, and each row's goal, asserted.
//   - breakerdefaults_test.go: the breaker's defaults, nothing configured:
//     a primary failing 30% of 2,000 calls under 50 concurrent callers, a
//     primary down 60 s and 5 minutes with a fallback, a 1 s blip and a
//     herd of 200 without one: the primary's share, how soon it serves
//     again, the probes a minute, the calls failed.
//   - money_test.go: 4 replicas share a $5 money budget on a real Redis
//     under 1,000 callers (not in virtual time): spend at the end against
//     the reservation's bound, the calls served by the primary, the
//     fallback, a degradation or refused, Redis round trips per call;
//     then with Redis paused mid-run (the outage allowance, Replicas 4
//     and the default) and with the default 50ms Timeout.
//
// The retry loops that are not backstop (the naive loop, the official
// SDKs' loop, the stacked layers) are plain Go in loops_test.go, calling the
// adapter's Complete directly in the same virtual time.
//
// Setting STORM_CSV=path writes the herd's arrivals per 100 ms bucket, one
// column per jitter mode, to path (a relative path is taken from this
// package's directory, where go test runs the tests). The plot module beside
// this package turns that file into docs/herd.svg:
//
//	STORM_CSV=herd.csv go -C examples/storm test -run StormHerd .
//	go -C examples/storm/plot run . -in ../herd.csv -out ../../../docs/herd.svg
//
// Setting STORM_MD=path rewrites the defaults-under-fault section of the
// markdown file at path (between its <!-- storm: defaults under fault -->
// markers) with the table, to refresh docs/performance.md:
//
//	STORM_MD=../../docs/performance.md go -C examples/storm test -run StormDefaults .
//
// and, the same way, the money section (between <!-- storm: money -->
// markers) with -run StormMoney.
//
// The whole lab takes about 30 seconds of real time on two cores (the
// spread, whose rows that do not throttle send some 75,000 requests to be
// refused, about 11 of them); TestMain prints it. Under the race detector
// (go test -race), which makes every request several times slower, the
// heavy scenarios run a shorter stretch of virtual time (the outage 2
// minutes instead of 10, the rate limit 1 minute instead of 3, the spread
// 30 seconds instead of 5 minutes; see race_on_test.go), and their
// headlines are asserted all the same.
package storm

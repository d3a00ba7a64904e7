// Package backstop keeps LLM features answering when model APIs fail.
//
// Applications call LLM APIs that return 429s, 529s, timeouts and outages.
// Naive retries turn a provider's bad minute into your own outage: retry
// storms, stacked retry layers, synchronized herds. backstop gives an
// application one place to say what happens instead, as a chain of targets
// walked in order:
//
//   - the primary model;
//   - the same model on another deployment (chain.Builder.OrDeployment);
//   - a sibling model on the same provider (OrSibling);
//   - another provider (OrProvider);
//   - graceful degradation: a static answer, a function, a last-known-good
//     answer (OrDegrade).
//
// Each target has its own prompt, parameters, retry policy (exponential
// backoff with jitter, Retry-After honoured as a floor) and per-attempt
// timeout; the decision table in package retry says, for each kind of
// failure, whether to retry, whether it counts against the target, and
// whether to move on.
//
// The packages, each with one job:
//
//   - llm: the shared vocabulary (Request, Response, Provider, Error, Kind).
//   - provider/anthropic, provider/openai: one HTTP attempt on the real wire
//     format, no retries inside.
//   - provider/fake: a scriptable fault-injecting server speaking both wire
//     formats, for tests and examples.
//   - retry: policies, backoff, Retry-After parsing, the decision table.
//   - chain: the builder and the executor.
//   - breaker, budget, validate, cache, tracing: circuit breakers, retry
//     budgets, schema validation, last-known-good stores and OpenTelemetry.
//
// This root package holds no code; it documents the module and hosts the
// end-to-end tests of the public API. Start with package chain, and run
// `go run ./examples/quickstart` to watch a small incident replayed on the
// fake provider.
package backstop

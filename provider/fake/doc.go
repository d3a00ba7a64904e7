// Package fake is backstop's fault injector: one HTTP server that speaks both
// the Anthropic Messages API (POST /v1/messages) and the OpenAI Chat
// Completions API (POST /v1/chat/completions), and fails on cue. It serves
// backstop's own tests, its examples, and users' tests of their chains.
//
// The real provider adapters talk to it over HTTP through their Config
// (BaseURL: s.URL(), HTTPClient: s.Client()), so the wire format is
// exercised end to end: request validation, success and error bodies,
// request ids, retry-after headers, resets and hangs.
//
// Each model follows a script of outcomes, one per request:
//
//	s := fake.New()
//	s.Script("claude-sonnet-5-5",
//		fake.Overloaded(),                    // 529 overloaded_error
//		fake.RateLimited("2"),                // 429 with retry-after: 2
//		fake.Answer(`{"ok":true}`).After(time.Second))
//
// or a function (Handle) for behaviour that depends on the request or on
// time. Every request is recorded (Requests, Arrivals, Calls) for
// assertions; API keys are never stored.
//
// The package owns the fake's wire formats and fault injection only. It
// depends on the standard library alone, never on the adapters it tests.
//
// Client and Transport serve requests in-process, without sockets, so they
// work inside testing/synctest bubbles: delays (After) and hangs (Hang) wait
// on timers and the request's context, so virtual time drives them and no
// goroutine outlives a request. Start runs a real loopback server instead,
// for examples and for faults that need a real connection, such as a TCP
// reset.
package fake

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
// work inside testing/synctest bubbles: delays (After, Every,
// FirstChunkAfter) and hangs (Hang, StallAfter) wait on timers and the
// request's context, so virtual time drives them and no goroutine outlives
// a request. Start runs a real loopback server instead, for examples and for
// faults that need a real connection, such as a TCP reset.
//
// # Streaming
//
// A request with "stream": true gets an Answer as server-sent events in its
// format, each event flushed as it is written, with Content-Type
// text/event-stream; charset=utf-8 and the request-id header:
//
//   - Anthropic: message_start, content_block_start, a ping, one
//     content_block_delta (text_delta) per chunk, content_block_stop,
//     message_delta (stop_reason and cumulative usage) and message_stop.
//   - OpenAI: a chat.completion.chunk with the assistant role, one per chunk
//     with choices[0].delta.content, one with finish_reason, one with usage
//     when the request sets stream_options.include_usage, and data: [DONE].
//
// The text is split into words unless Chunks sets the pieces; Every spaces
// them, FirstChunkAfter delays the first; ErrorAfter, StallAfter and
// CutAfter fail the stream after n chunks with an in-stream error event, a
// stall or a cut connection:
//
//	s.Script("claude-sonnet-5-5",
//		fake.Answer("Hello there, friend").FirstChunkAfter(2*time.Second), // slow first token
//		fake.Answer("Hello there").Every(time.Second).StallAfter(1),       // stalls after "Hello"
//		fake.Answer("Hello there").ErrorAfter(1),                          // overloaded_error mid-stream
//		fake.Overloaded())                                                 // a 529 before any stream
//
// Every other outcome answers a streamed request as it answers any other,
// before the stream starts: a Status error with its JSON body, a Hang, a
// ConnReset. The same script therefore serves streamed and unstreamed
// requests, and Calls shows which was which in the recorded Body.
//
// Through Client and Transport the response returns once its headers are
// written and its body delivers each event as the fake writes it; a reader
// waiting for the next event (during Every, FirstChunkAfter or a stall) is
// durably blocked under testing/synctest, so virtual time moves on. Closing
// the body, or ending the request's context, ends the fake's handler at
// once.
package fake

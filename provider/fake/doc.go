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
// # Requests
//
// The fake checks each request as the real API would and answers an invalid
// one with the API's own error (a 400 invalid_request_error, or a 401), in
// the provider's error body, without taking an outcome from the script; the
// request is still recorded. The shapes it knows were taken from the
// official SDKs (anthropic-sdk-go/v2 v2.15.0, openai-go/v3 v3.98.0) and the
// APIs' documentation; the messages follow the APIs' wording.
//
// Anthropic (POST /v1/messages):
//
//   - Authentication: x-api-key, or Authorization: Bearer <key> (which the
//     current SDK sends); neither is a 401 authentication_error.
//   - anthropic-version is required and must be 2023-01-01, 2023-06-01 or
//     2026-10-21 (the one anthropic-sdk-go v2.15.0 sends).
//   - Top-level fields must be Messages API parameters: those of the SDK's
//     MessageNewParams and BetaMessageNewParams, stream, and the deprecated
//     temperature, top_k and top_p. Any other is "<field>: Extra inputs are
//     not permitted".
//   - model is a non-empty string; max_tokens an integer from 0 (0 is
//     documented as pre-warming the prompt cache; the fake answers it as
//     scripted) to the model's output limit. The fake assumes these limits
//     from the model's name: 4096 for claude-3-*, 8192 for claude-3-5-*,
//     64000 for claude-3-7-*, 32000 for claude-opus-4-0, claude-opus-4-1 and
//     claude-opus-4-2025*, 64000 for claude-opus-4-5*, 128000 for any other
//     name containing "opus", and 64000 for every other model;
//     MaxOutputTokens overrides them.
//   - messages: a non-empty list of user or assistant turns. Consecutive
//     turns of one role are accepted (the API merges them), and so is a
//     first turn from the assistant. content is a string or a list of
//     blocks (text, image, document, search_result, tool_use, tool_result,
//     thinking, server tool blocks, …), not empty except in a final
//     assistant turn, which must not end in whitespace; text blocks must not
//     be empty; image and document need a source; tool_use needs an id, a
//     name and an object input.
//   - Every tool_result must answer a tool_use of the previous assistant
//     turn, and every tool_use of an assistant turn must be answered by a
//     tool_result in the next user turn (a final assistant turn may end in
//     tool_use).
//   - system is a string or a list of text blocks; temperature and top_p
//     are numbers in [0, 1]; top_k an integer >= 0; stream a boolean;
//     tools have a name and, for custom tools, an input_schema object;
//     tool_choice is {"type": auto | any | none | tool (with a name)}.
//
// OpenAI (POST /v1/chat/completions):
//
//   - Authentication: Authorization: Bearer <key>.
//   - Top-level fields must be those of openai-go's ChatCompletionNewParams
//     or stream: any other is "Unrecognized request argument supplied: …".
//   - messages: a non-empty list; roles system, developer, user, assistant,
//     tool, function. content is required (an assistant may leave it out
//     when it has tool_calls), a string or a list of parts of the types
//     its role allows (user: text, image_url, input_audio, file).
//     Assistant tool_calls need an id, a type and a function with a name
//     and arguments; a tool message needs a tool_call_id answering a call of
//     the assistant message just before it, and every such call must be
//     answered before the next other message.
//   - temperature in [0, 2], top_p in [0, 1], presence_penalty and
//     frequency_penalty in [-2, 2], n in [1, 128], max_completion_tokens
//     and max_tokens >= 1; stream_options only with stream; tools of type
//     function (with function.name) or custom; tool_choice none, auto,
//     required or an object, and only with tools; response_format of type
//     text, json_object or json_schema (with json_schema.name).
//
// Structured output requests (OpenAI response_format, Anthropic
// output_config or output_format) are checked for shape but not enforced:
// an Answer is sent as scripted, whatever the schema.
//
// What a request carried is recorded in its Call: Tools (the names of the
// tools it declared) and ToolResults (the tool results it sent back), next
// to its raw Body and redacted Header.
//
// # Answers
//
// Answers carry every field the SDKs mark required, with realistic values:
// Anthropic stop_details, container and diagnostics (null; stop_details is
// {"type":"refusal",…} for a Refusal), text blocks' citations (null), and a
// usage with cache_creation, output_tokens_details, server_tool_use,
// service_tier "standard", inference_geo "global" and speed "standard";
// OpenAI service_tier "default", system_fingerprint "fp_fake", logprobs
// null, message.annotations [] and usage.prompt_tokens_details and
// completion_tokens_details. Cached sets the cached input tokens, Refusal
// makes the model decline, and an OpenAI request with "n": k gets k
// identical choices.
//
// CallTools (or Answer(text).ToolCalls) answers with tool calls, ids in
// each format's style (toolu_fake_N_I, call_fake_N_I) unless set, and the
// finish reason tool_use or tool_calls:
//
//	s.Script("claude-sonnet-5-5",
//		fake.CallTools(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}),
//		fake.Answer("It is sunny in Paris."))
//	// … then assert on s.Calls("claude-sonnet-5-5")[1].ToolResults.
//
// # Rate-limit headers
//
// Every response to an accepted request carries the rate-limit headers of
// its model's per-minute buckets, which each request drains and time.Now
// refills: anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining,reset}
// (reset an RFC 3339 time) and x-ratelimit-{limit,remaining,reset}-{requests,tokens}
// (reset a Go duration). RateLimits sets a model's limits, or turns the
// headers off; the fake reports the limits but never enforces them.
//
// The module provider/fake/sdktest drives the fake with the official Go
// SDKs and fails when an answer lacks a field they require.
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
//     content_block_delta (text_delta) per chunk, content_block_stop, then
//     for each tool call a content_block_start (tool_use), input_json_delta
//     pieces and a content_block_stop, message_delta (stop_reason and
//     cumulative usage) and message_stop. An answer of tool calls alone has
//     no text block.
//   - OpenAI: a chat.completion.chunk with the assistant role, one per chunk
//     with choices[0].delta.content (delta.refusal for a Refusal), for each
//     tool call one delta.tool_calls chunk with its index, id and name and
//     then pieces of its arguments, one with finish_reason, one with usage
//     when the request sets stream_options.include_usage, and data: [DONE].
//     With "n": k, each chunk is sent once per choice index.
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

// Package fake is backstop's fault injector: one HTTP server that speaks
// the Anthropic Messages API (POST /v1/messages), the OpenAI Chat
// Completions API (POST /v1/chat/completions), and the cloud deployments of
// models (Anthropic on Amazon Bedrock and Google Vertex AI, Gemini on the
// Gemini API and Vertex AI, Azure OpenAI; see Cloud platforms), and fails
// on cue. It serves backstop's own tests, its examples, and users' tests of
// their chains.
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
//     name containing "opus", and 64000 for every other model.
//   - messages: a non-empty list of user or assistant turns. Consecutive
//     turns of one role are accepted (the API merges them), and so is a
//     first turn from the assistant. content is a string or a list of
//     blocks (text, image, document, search_result, tool_use, tool_result,
//     thinking, server tool blocks, …), not empty except in a final
//     assistant turn, which must not end in whitespace; text blocks must not
//     be empty; image and document need a source; tool_use needs an id, a
//     name and an object input. An inline image's media_type is
//     image/jpeg, image/png, image/gif or image/webp; an inline document's
//     is application/pdf, a text source's text/plain (the media types
//     provider/anthropic declares).
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
//     its role allows (user: text, image_url, input_audio, file). A file's
//     file_data, a data: URL, must be of application/pdf, the only file
//     type Chat Completions takes.
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
// # Cloud platforms
//
// The same server answers the platforms' paths, and Call.Format tells them
// apart. Scripts are keyed by the model as the path names it (URL-decoded),
// so one Script drives every format; every outcome (Answer, CallTools,
// Refusal, the canned errors, Hang, ConnReset, After, the stream faults)
// is rendered in each platform's wire format. The shapes were read from the
// official SDKs: anthropic-sdk-go/v2 v2.15.0 (bedrock, vertex), genai
// v1.77.0, openai-go/v3 v3.98.0 (azure) and aws-sdk-go-v2's
// aws/protocol/eventstream v1.7.27.
//
// Bedrock (Format Bedrock): POST /model/{modelId}/invoke and
// /model/{modelId}/invoke-with-response-stream, modelId a model id, an
// inference profile (us., eu., apac., global.) or an ARN (its slash sent
// as %2F, as the SDK does).
//
//   - Authentication: an Authorization header of SigV4 shape,
//     AWS4-HMAC-SHA256 Credential=AKID/YYYYMMDD/REGION/bedrock/aws4_request,
//     SignedHeaders=… (including host), Signature=<64 hex digits>, with an
//     X-Amz-Date of the scope's date. The scope's service must be bedrock
//     and its region the server's (Region, by default us-east-1). The
//     signature is not verified. A Bedrock API key (Authorization: Bearer)
//     is accepted too. Failures are 403 MissingAuthenticationTokenException,
//     IncompleteSignatureException or InvalidSignatureException.
//   - Body: the Anthropic Messages body without model and stream
//     ("extraneous key [model] is not permitted"), with anthropic_version
//     bedrock-2023-05-31 or an anthropic-version value (anthropic-sdk-go
//     v2.15.0 forwards its header, 2026-10-21); anthropic_beta is allowed.
//     The rest is checked as for Anthropic.
//   - Answers: the Anthropic message JSON; x-amzn-RequestId carries the
//     request id; no rate-limit headers.
//   - Streams: Content-Type application/vnd.amazon.eventstream, each
//     Anthropic event one event-stream message (headers :event-type chunk,
//     :content-type application/json, :message-type event; payload
//     {"bytes":"<base64 of the event's JSON>"}), encoded by the fake itself
//     with both CRCs. ErrorAfter sends an exception message
//     (:message-type exception, :exception-type internalServerException
//     unless Type sets another, such as throttlingException or
//     modelStreamErrorException; payload {"message":…}).
//   - Errors: {"message":…} with x-amzn-ErrorType: 400
//     ValidationException, 403 AccessDeniedException, 404
//     ResourceNotFoundException, 408 ModelTimeoutException, 424
//     ModelErrorException, 429 ThrottlingException, 500
//     InternalServerException, 503 ServiceUnavailableException (Overloaded);
//     SpendCap is a 400 ServiceQuotaExceededException, ContextTooLong a 400
//     "Input is too long for requested model.". Type sets the error type.
//
// Vertex AI, Anthropic (Format Vertex): POST
// /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{model}:rawPredict
// and :streamRawPredict, model such as claude-sonnet-4-5@20250929.
// Authorization: Bearer <token> is required (not verified; else a 401
// UNAUTHENTICATED). The body is the Messages body with anthropic_version
// vertex-2023-10-16 (or an anthropic-version value, as the SDK sends it);
// a model in it is ignored. A stream is asked for with "stream": true, as
// the SDK sends it, and answers and streams are exactly Anthropic's. Errors
// that are Vertex's own are google.rpc.Status (see Gemini): 401, 403, 404,
// request checks before Anthropic's and the rate limit, a 429
// RESOURCE_EXHAUSTED with RetryInfo; the others (Overloaded's 529,
// ServerError, BadRequest, SpendCap, …) are passed through in Anthropic's
// error body.
//
// Gemini (Format Gemini, POST /v1beta/models/{model}:generateContent and
// :streamGenerateContent?alt=sse, key in x-goog-api-key or ?key=, else a
// 403 PERMISSION_DENIED) and Gemini on Vertex AI (Format VertexGemini,
// /v1/projects/{p}/locations/{l}/publishers/google/models/{model}:… or, in
// express mode, /v1/publishers/google/models/{model}:… (v1beta1 too, as
// genai sends it), Bearer or an API key, else a 401 UNAUTHENTICATED):
//
//   - Requests: contents is a non-empty list of {role user|model, parts},
//     parts non-empty, each with exactly one data field (text, inlineData
//     with mimeType and data, fileData, functionCall with a name,
//     functionResponse with a name, …); systemInstruction, tools
//     (functionDeclarations with names, recorded in Call.Tools),
//     generationConfig (temperature in [0, 2], topP in [0, 1],
//     maxOutputTokens >= 1, candidateCount in [1, 8], at most 5
//     stopSequences, responseMimeType text/plain, application/json or
//     text/x.enum, required for responseSchema / responseJsonSchema).
//     Unknown fields are 400 "Unknown name". snake_case names are accepted
//     as the APIs accept them. functionResponse parts are recorded in
//     Call.ToolResults (ID the response's id, else its name; Content its
//     response as JSON).
//   - Answers: {candidates:[{content:{role:model, parts}, finishReason,
//     index}], usageMetadata:{promptTokenCount, candidatesTokenCount,
//     totalTokenCount, cachedContentTokenCount}, modelVersion, responseId
//     resp_fake_N}. finishReason is STOP (tool calls too) unless Finish
//     sets MAX_TOKENS, SAFETY, …; tool calls are functionCall parts (with
//     an id only when the ToolCall sets one); a Refusal is a candidate with
//     finishReason SAFETY and no content.
//   - Streams (alt=sse only: without it the fake answers 400): one
//     data: line per chunk of text, then a last chunk with the tool calls
//     (or an empty text part), the finish reason and the full usage.
//     ErrorAfter sends data: {"error":{"code":503,…,"status":"UNAVAILABLE"}}.
//   - Errors: {"error":{"code":…,"message":…,"status":…,"details":[…]}}:
//     400 INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, 404
//     NOT_FOUND, 429 RESOURCE_EXHAUSTED (RateLimited with a retry-after in
//     seconds adds {"@type":"type.googleapis.com/google.rpc.RetryInfo",
//     "retryDelay":"30s"}; SpendCap has none), 500 INTERNAL, 503 UNAVAILABLE
//     (Overloaded), 504 DEADLINE_EXCEEDED. Type sets error.status. The
//     outcome's Retry-After header is sent as set (the real APIs send none;
//     remove it with Header("Retry-After", "")).
//
// Azure OpenAI (Format Azure): POST
// /openai/deployments/{deployment}/chat/completions?api-version=YYYY-MM-DD[-preview]
// (scripts keyed by the deployment; model in the body optional) and
// /openai/v1/chat/completions (model in the body, api-version optional: v1,
// preview or a date). A missing api-version on the deployments path is a
// 404 {"error":{"code":"404","message":"Resource not found"}}, a malformed
// one or one before 2022-12-01 a 400 "API version not supported". The key
// is api-key or Authorization: Bearer (Entra ID), else a 401 "Access
// denied due to invalid subscription key or wrong API endpoint…". Bodies,
// answers and streams are OpenAI's (data_sources is allowed); Azure's own
// errors are {"error":{"code":"<string>","message":…}}: 401, 404
// DeploymentNotFound and the rate limit (429, "Please retry after N
// seconds."); the others are OpenAI's. Answers carry the x-ratelimit
// headers and the request id in apim-request-id.
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
// completion_tokens_details. Usage sets the token counts, Cached and
// CacheWrite the input tokens read from and written to the prompt cache
// (each wire format counting them as its API does, so that every adapter
// reads the same llm.Usage), Refusal makes the model decline, and an
// OpenAI request with "n": k gets k identical choices.
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
// them, FirstChunkAfter delays the first, PauseAfter holds the stream for a
// while mid-answer; MalformedEventAfter slips in one event that is not the
// format's JSON, and NoSentinel leaves out the [DONE] line or message_stop
// event after the finish; ErrorAfter, StallAfter and CutAfter fail the
// stream after n chunks with an in-stream error event, a stall or a cut
// connection:
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

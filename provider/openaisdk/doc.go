// Package openaisdk is the backstop adapter over the official OpenAI Go SDK
// (github.com/openai/openai-go/v3, pinned at v3.98.0 by this module's
// go.mod). It is its own Go module, so that backstop itself does not
// depend on the SDK: only programs that import this package do.
//
// Use it when the program already builds an openai.Client (its
// credentials, Azure identity, middleware, proxies, organization and
// project headers) and wants the chain to call through it; the native
// adapter, provider/openai, needs no SDK at all.
//
// # What it owns
//
// The translation between llm and the SDK's params and answers, for two
// APIs (Config.API):
//
//   - "chat" (the default): Chat Completions, exactly as the native
//     adapter sends and reads it: system prompt as a system message;
//     images as image_url parts (a data: URL for inline bytes), PDFs as
//     file parts, text documents as text; a user message's tool results
//     as "tool" messages placed before it; an assistant message's tool
//     calls as tool_calls; tools, tool_choice, response_format json_schema
//     strict from Request.ResponseSchema; max_completion_tokens,
//     temperature, top_p, stop; Params.Extra merged at the top level
//     (option.WithJSONSet: a key replaces the SDK's, nil sends null). The
//     answer's text, tool calls (arguments always valid JSON), finish
//     reason (classify.FinishOf), usage, model and id; a refusal or a
//     content_filter finish is a KindContentFilter error.
//   - "responses": the Responses API, with the equivalent input items:
//     System as instructions, messages as input messages (input_text,
//     input_image, input_file with file_data, or file_url for a document
//     by URL), tool calls as function_call items, tool results as
//     function_call_output items; function tools sent with strict false
//     (the API's default is true, which would refuse schemas Chat
//     Completions takes); text.format json_schema strict;
//     max_output_tokens. It has no stop sequences: a request with
//     Params.Stop fails with KindBadRequest, nothing sent. A response has
//     no finish_reason: FinishReason is its status ("completed") or the
//     reason it is incomplete ("max_output_tokens": FinishLength), and
//     Finish is FinishToolUse when it holds function calls.
//
// Tool-call ids are translated as the native adapter translates them: an
// id OpenAI would refuse (over 40 bytes, or not letters, digits, _ and -)
// goes out as call_ and 24 hex digits and comes back as the caller's. An
// answer's call is named as the native adapter names it too: one whose id
// the conversation already holds is renamed <id>_2, one without an id is
// call_<n> (see wire.CallIDs), so that no two calls share an id.
//
// Every failure is an *llm.Error. An SDK error (*openai.Error) is
// classified by classify.Classify with the classify.VendorOpenAI table, from its
// status, headers, type, code, message and raw body: the same Kind,
// RetryAfter, RequestID and rate limit the native adapter gives the same
// reply (the shared table, suite.Classes("openai"), is tested). A body the
// SDK cannot read is classified by status; a transport error by
// llm.KindOf (KindCanceled when the context was canceled). A panic inside
// the SDK, a middleware or a RoundTripper is recovered into a KindUnknown
// error.
//
// # The guard: one request, capped, its credentials redacted
//
// Every call of both APIs, Complete and Stream, installs one middleware of
// its own (option.WithMiddleware, passed with the call, so after the
// client's middleware and the adapter's other one, the "data: [DONE]"
// watch): the attempt's wire.Exchange, the guard the native adapters'
// endpoint keeps. Below it is only the SDK's HTTP client (with the azure
// package's credential middleware, which the SDK installs last; see
// below). The SDK reads no body that has not passed it. It holds the
// attempt to these rules:
//
//   - Memory: every body, success or error, compressed or not (the cap is
//     on what it inflates to), is read whole under Config.MaxResponseBytes
//     (8 MiB by default) before the SDK sees it; each line and each event
//     of a stream is read under the same cap, whatever the SDK's scanner
//     would take; the text, the refusal and the tool calls a stream
//     assembles are each capped too. Past the cap the attempt fails with a
//     classified *llm.Error (KindServer for a 2xx, the status's kind
//     otherwise) having read at most the cap: the error is the guard's,
//     never what the SDK made of the body it was refused.
//   - Credentials: the guard learns every credential the request carries
//     as it leaves (the OpenAI key's Authorization bearer, the Azure
//     api-key) and every one the response's request shows a layer below
//     added (the bearer token of azure.WithTokenCredential), whether or
//     not Config.APIKey names it, and redacts them all from every error
//     (Message, Detail, Type, Code, RequestID, the text of Err) and from
//     the metadata of every answer (ID, Model, RequestID, FinishReason),
//     a stream's Response() and the errors a stream raises included. So a
//     server that echoes a credential in its request-id header, its error
//     message or its answer's id puts nothing into logs, span attributes
//     and statuses, Result.Served or a LastGood store.
//   - Provider text: what the provider says (its error message, the start
//     of a body that is not the expected JSON, the text of an SDK error
//     that may quote one) is only ever in llm.Error.Detail, cut to 512
//     bytes and redacted; Error(), Message and Err's text are the
//     adapter's words, plus the provider's error type and code and the
//     request id. Span statuses and logs use Error().
//   - Redirects: one attempt is one request to the configured origin. A
//     3xx that comes back fails the attempt with KindNotFound and Code
//     "redirect", its status and where it pointed in the message; the
//     guard takes from the request the means to re-send its body, so a
//     client that follows redirects hands back a 307 or 308 instead of
//     following it. A 301, 302 or 303 that the client follows (a GET,
//     without the body) to another origin is refused by the SDK itself
//     before it is sent (openai-go's origin check, the azure package's
//     credential transport): nothing reaches the other host, and the
//     attempt fails the same way (Status 0: the 3xx never came back; its
//     URL is not quoted, the server having chosen it). One the client
//     follows on the same origin reaches that origin, which the adapter
//     cannot stop inside the client, but its answer is not taken: the
//     attempt fails the same way. This holds with the SDK's default
//     client and with one given by option.WithHTTPClient, following
//     redirects or not.
//
// What remains the caller's, because it happens below the guard or
// outside the adapter: a RoundTripper in the client the SDK was given sees
// every request and response as they are on the wire. With
// azure.WithTokenCredential the Azure SDK's token pipeline runs below the
// guard (the azure package installs it after every option): it re-sends
// the request once, to the same origin, after a 401 carrying a claims
// challenge (continuous access evaluation); and it gives its request the
// means to re-send the body, so a client that follows redirects
// (http.DefaultClient, the SDK's default, does) follows a 307 or 308 on
// the same origin, up to its limit of 10, with the body and the token
// before the adapter fails the attempt. Give such a client
// option.WithHTTPClient(&http.Client{CheckRedirect: func(*http.Request,
// []*http.Request) error { return http.ErrUseLastResponse }}) to keep
// every redirect to one request.
//
// Streams read the SDK's ssestream on the caller's goroutine. Chat: text
// deltas are chunks; tool calls are assembled by index and delivered as
// Chunk{ToolCall} once finish_reason arrives; the usage chunk is read
// (stream_options.include_usage is sent); an event carrying an "error"
// object is classified as the same error before the stream, with status
// 200. Responses: response.output_text.delta is text; a function call's
// arguments are assembled from response.function_call_arguments.delta and
// the call delivered at response.output_item.done; response.completed
// (or response.incomplete) ends the answer; an "error" event or
// response.failed is classified by its code. A stream that ends before
// its end (Chat: neither "data: [DONE]", which the SDK consumes without a
// trace, so the adapter watches the body for it, nor a finish_reason
// before a clean end of the body; Responses: no response.completed)
// fails with KindConnection, as with the native adapter. A server that answers a streaming request with a JSON body is
// read as Complete reads it: its text as one chunk, then its tool calls.
//
// # Building the client
//
// OpenAI:
//
//	client := openai.NewClient(option.WithAPIKey(key))
//	p, err := openaisdk.New(client, openaisdk.Config{APIKey: key})
//
// Azure OpenAI (the model names the deployment; requests go to
// /openai/deployments/{model}/chat/completions?api-version=…, the key in
// the api-key header):
//
//	client := openai.NewClient(
//		azure.WithEndpoint("https://RESOURCE.openai.azure.com", "2024-10-21"),
//		azure.WithAPIKey(key), // or azure.WithTokenCredential(cred)
//	)
//	p, err := openaisdk.New(client, openaisdk.Config{Platform: "azure", Region: "westeurope", APIKey: key})
//
// Config.Region is the caller's word, not something the adapter checks:
// an Azure resource's endpoint (RESOURCE.openai.azure.com, a custom
// subdomain, a private endpoint) does not say the region the resource was
// created in, nor where a Global or Data Zone deployment processes the
// request, and openai-go has no way to ask. Deployment reports Region as
// given, and a chain's AllowRegions trusts it: set it to the region of the
// resource and the deployment type the request may be processed in. The
// same holds for Config.Platform, which names what the client points at
// without looking.
//
// Compatible servers take option.WithBaseURL and, usually, a key (any
// placeholder for a local server); name the platform so that errors and
// telemetry say where the call went:
//
//	vLLM     option.WithBaseURL("http://localhost:8000/v1")
//	Ollama   option.WithBaseURL("http://localhost:11434/v1")
//	Groq     option.WithBaseURL("https://api.groq.com/openai/v1")
//	Mistral  option.WithBaseURL("https://api.mistral.ai/v1")
//	Together option.WithBaseURL("https://api.together.xyz/v1")
//
//	client := openai.NewClient(option.WithBaseURL("https://api.groq.com/openai/v1"), option.WithAPIKey(key))
//	p, err := openaisdk.New(client, openaisdk.Config{Platform: "groq", APIKey: key})
//
// The SDK decodes a success body only when its Content-Type is JSON; a
// compatible server sending another type fails with KindServer.
//
// Every field of Config defaults when zero; New checks it once with
// Config.Validate, and every error it returns matches the module's
// invalid-configuration sentinel (errors.Is(err, llm.ErrInvalidConfig))
// and names the field to change.
//
// # Retries are off, per request
//
// The SDK retries by default (2 retries; connection errors, 408, 409, 429
// and 5xx; its own backoff and Retry-After handling). Under backstop the
// chain owns retries, waits and fallbacks, and a provider makes exactly
// one attempt: retry layers that stack multiply the load on a provider
// that is already failing, and hide each attempt from the breaker, the
// budget and the telemetry. So every call passes option.WithMaxRetries(0)
// after the client's options, which wins whatever the client was built
// with (a client built with option.WithMaxRetries(5) still sends one
// request), and the guard, which refuses a second request in the same
// attempt (a middleware that retries). The client's other options
// (timeouts, middleware, headers) apply as configured; give it no
// retrying RoundTripper either.
//
// # Moving the pinned SDK version
//
// The SDK is pinned in go.mod (require github.com/openai/openai-go/v3
// v3.98.0). To move it: in this folder, go get
// github.com/openai/openai-go/v3@vX.Y.Z && go mod tidy; read the SDK's
// CHANGELOG for changes to the params and unions used here (chat
// completion messages, content parts, tools, tool_choice, response_format;
// responses input items, output items and stream events), to
// option.WithMaxRetries, option.WithMiddleware (the order in which
// middleware runs: the guard must stay below the client's) and
// option.WithJSONSet, to packages/ssestream, to *openai.Error, to the
// SDK's origin check on redirects and to the azure package's credential
// middleware; then run go vet ./... and go test -race ./... here, which
// check the bodies sent, the one-request rule, the error classes, the
// caps, the redirects and the redaction against loopback servers on every
// platform. The error-code table is
// llm's (classify.VendorOpenAI), shared with the native adapter: new codes the
// SDK documents belong there.
//
// # Testing against the fake provider
//
// provider/fake serves OpenAI's and Azure OpenAI's Chat Completions wire
// formats and fails on cue, so a chain of your own can be tested without a
// key. The example Fake (example_fake_test.go) points an openai.Client at
// it (option.WithBaseURL) in a chain whose primary's 503 is served by a
// fallback; FakeAzure does the same with an Azure client
// (azure.WithEndpoint).
package openaisdk

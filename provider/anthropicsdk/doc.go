// Package anthropicsdk is the backstop provider over the official Anthropic
// Go SDK (github.com/anthropics/anthropic-sdk-go/v2), for callers who
// already build an anthropic.Client (for the Anthropic API, Amazon Bedrock
// or Google Vertex AI) and want backstop's chains over it. It lives in a
// module of its own, so that backstop itself never requires the SDK.
//
// # What it owns
//
// The package owns the translation between backstop and the SDK, and of
// the wire only the guard every attempt goes through (see Caps, Redirects
// and What errors and telemetry may contain): the client sends,
// authenticates, signs (Bedrock), rewrites the URL (Bedrock, Vertex) and
// decodes. Provider translates an
// llm.Request into MessageNewParams exactly as the native adapter
// (provider/anthropic) writes its body (system, messages with text, image,
// document, tool_use and tool_result blocks, tools, tool_choice,
// output_config, max_tokens, temperature, top_p, stop_sequences and
// Params.Extra), translating tool-call ids the API would refuse as the
// native adapter does; it translates the SDK's Message and stream events
// back into llm.Response and llm.Chunk (text, tool calls, finish reason,
// usage with cached input, model, id, request id, rate limit); and it turns
// every error the SDK returns into an *llm.Error classified by classify.Classify
// with the same vendor tables as the native adapter, so that a chain
// decides alike whichever adapter a target uses. The tests run the shared
// error classes (suite.Classes("anthropic")) and compare the bodies, the
// answers and the errors with the native adapter's.
//
// # Building the client
//
// The Anthropic API:
//
//	client := anthropic.NewClient(option.WithAPIKey(key))
//	p, err := anthropicsdk.New(client, anthropicsdk.Config{APIKey: key})
//
// Amazon Bedrock (the region is given twice: the SDK does not expose the
// one in its configuration):
//
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("eu-west-1"))
//	client := anthropic.NewClient(bedrock.WithConfig(cfg))
//	p, err := anthropicsdk.New(client, anthropicsdk.Config{Platform: "bedrock", Region: "eu-west-1"})
//
// Google Vertex AI:
//
//	client := anthropic.NewClient(vertex.WithGoogleAuth(ctx, "europe-west4", "my-project"))
//	p, err := anthropicsdk.New(client, anthropicsdk.Config{Platform: "vertex", Region: "europe-west4"})
//
// Give an HTTP client of your own (a proxy, TLS settings, instrumentation)
// in Config.HTTPClient, not with option.WithHTTPClient: see Redirects.
//
// Every field of Config defaults when zero; New checks it once with
// Config.Validate, and every error it returns matches the module's
// invalid-configuration sentinel (errors.Is(err, llm.ErrInvalidConfig))
// and names the field to change.
//
// Name returns the OpenTelemetry gen_ai.provider.name of the platform
// ("anthropic", "aws.bedrock", "gcp.vertex_ai") unless Config.Name
// overrides it, and Deployment the platform and region, so that a chain
// can tell the same model on two platforms apart. Model ids are the
// platform's own ("claude-…" on the API, "eu.anthropic.claude-…-v1:0" on
// Bedrock, "claude-…@YYYYMMDD" on Vertex).
//
// # Retries are off, per request
//
// The SDK retries twice by default (connection errors, 408, 409, 429 and
// 5xx, waiting out Retry-After in full). A backstop provider makes exactly
// one attempt per Complete or Stream: the chain owns retries, waits,
// breakers and fallbacks, and a retry layer under it would multiply the
// attempts (three SDK tries under three chain tries are nine requests) and
// hide the failures the breaker counts. So every call passes
// option.WithMaxRetries(0), which overrides whatever the client was built
// with: one call is one HTTP request, whatever the client's setting (the
// tests prove it with a client built with option.WithMaxRetries(5)). Each
// call also passes option.WithResponseInto, to read the request-id and
// anthropic-ratelimit-* headers, and a middleware of its own, innermost
// (after the client's middleware, Bedrock's signing and Vertex's
// rewriting): the attempt's wire.Exchange, which enforces what follows. A
// middleware of the client's own that calls next a second time gets an
// error instead of a second request, and the attempt fails.
//
// # Caps
//
// Config.MaxResponseBytes (8 MiB by default) bounds what an attempt
// reads, as the native adapter bounds it: every body, success or error,
// read whole under the cap before the SDK sees it (a gzip body is capped on
// what it inflates to), every event of a stream (each line and each event
// of the server-sent events; each frame of Bedrock's event stream, refused
// on its length before its payload is read), and the text and tool calls a
// Stream assembles. Past the cap the attempt fails with an *llm.Error
// (KindServer for a 2xx, else as the status says) having read at most the
// cap; the SDK never reads a body that did not pass through the cap.
//
// # Redirects
//
// One attempt is one request to the client's origin. New puts a copy of
// Config.HTTPClient (or of a client like the SDK's default) under the SDK
// that refuses every redirect: a 3xx fails the attempt with KindNotFound,
// Code "redirect", naming where it pointed, and nothing reaches the other
// host, on every platform (Vertex's OAuth transport is added over that
// copy, as over any client the SDK is given; Bedrock sends with it). The
// copy goes into the client's options right after the first
// requestconfig.CallBoundary that anthropic.NewClient puts there (first
// when there is none: a client not built by NewClient), which
// TestGuardAfterTheCallBoundary pins, so that an SDK that builds its
// options otherwise fails the tests.
//
// An HTTP client the caller gives with option.WithHTTPClient replaces that
// copy, and what it does with a redirect is then its own: the provider
// still refuses to re-send the body (a 307 or 308 comes back as a 3xx and
// fails the attempt) and fails an attempt whose answer came from another
// origin, but a client that follows a 301, 302 or 303 has by then sent a
// GET, without the body, with the headers net/http keeps for another host
// (Bedrock's X-Amz-Security-Token, the API's x-api-key, and Vertex's OAuth
// token, which its transport adds to every request), to wherever the
// server pointed.
//
// # What errors and telemetry may contain
//
// Every error Complete, Stream and Next return is an *llm.Error whose
// Error() (what spans and logs record) holds no words of the provider's
// but its error type and request id: the provider's message, a quote of a
// body that is not the expected JSON and an SDK error's text are in
// Detail, cut to 512 bytes, and an SDK error travels as Err only wrapped
// (wire.Opaque) so that its text, which may quote the response, stays out
// of Error(). Every credential the request carried (see Config.APIKey),
// and Config.APIKey, is redacted from every field of every error and from
// an answer's ID, Model, RequestID and FinishReason, a streamed answer's
// Response() included. The SDK's own OpenTelemetry spans, which it records
// through the registered tracer provider unless told otherwise
// (option.WithOpenTelemetryTraces), are the SDK's: the provider does not
// see them.
//
// # Regions: what is checked, what remains your word
//
// The SDK does not say which region a Bedrock or Vertex client sends to,
// so Config.Region is the caller's word for it, and Deployment reports
// it. What the provider can check, it checks. A request whose SigV4
// credential scope or bedrock-runtime host (Bedrock), or whose location
// in the path (Vertex), names another region is refused before it leaves
// (KindNotFound, Code "region"). ModelDeployment (which a chain asks at
// Build, llm.ModelDeployedProvider) fails for a Bedrock model or
// inference-profile ARN of another region than Config.Region, and for a
// cross-region inference profile id ("us.", "eu.", "apac.", …) whose
// geography does not hold it; a chain judges AllowRegions by the ARN's
// region. What remains your word: a Bedrock client signing with a bearer
// token (AWS_BEARER_TOKEN_BEDROCK) to a base URL that names no region
// shows no region at all, nor does the Anthropic API; where a cross-region
// profile routes within its geography, and where Anthropic's API or an
// application inference profile built over a cross-region profile
// processes data, are the platforms' to say.
//
// # Limits of the SDK this version shows
//
// The SDK's stream skips events that have no "event:" line, and fails on
// an event of an unknown type whose data is not JSON (the native adapter
// skips it). The SDK refuses a non-streaming request it expects to take
// more than ten minutes (max_tokens over about 21,000, or over a model's
// non-streaming limit) unless it has an attempt timeout; Complete sends it
// all the same, as the native adapter does, with option.WithRequestTimeout
// set to ctx's deadline (an hour without one).
// CheckResponseSchema applies the native adapter's rules for structured
// outputs (provider/internal/anthropicwire).
//
// # Moving the pinned SDK version
//
// go.mod pins github.com/anthropics/anthropic-sdk-go/v2 (v2.15.0). To move
// it, edit the version in go.mod (or run go get
// github.com/anthropics/anthropic-sdk-go/v2@vX.Y.Z), run go mod tidy, then
// gofmt -l ., go vet ./... and go test -race ./... in this directory: the
// tests compare the request bodies, the answers and the error
// classification with the native adapter's, so a change in how the SDK
// encodes a block, decodes an event or reports an error fails them, and
// TestGuardAfterTheCallBoundary fails if the SDK builds a client's options
// otherwise than New expects (see Redirects). Read
// the SDK's CHANGELOG for new params fields (temperature and top_p are
// set with option.WithJSONSet because v2.15.0's params have none) and new
// error codes (llm's tables cover those v2.15.0 documents).
//
// # Testing against the fake provider
//
// provider/fake serves the Anthropic API's, Bedrock's and Vertex AI's wire
// formats and fails on cue, so a chain of your own can be tested without a
// key. The example Fake (example_fake_test.go) points an anthropic.Client
// at it (option.WithBaseURL) in a chain whose primary's 529 is served by a
// fallback; FakePlatforms does the same with Bedrock and Vertex AI
// clients.
package anthropicsdk

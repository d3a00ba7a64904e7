// Package anthropicsdk is the backstop provider over the official Anthropic
// Go SDK (github.com/anthropics/anthropic-sdk-go/v2), for callers who
// already build an anthropic.Client (for the Anthropic API, Amazon Bedrock
// or Google Vertex AI) and want backstop's chains over it. It lives in a
// module of its own, so that backstop itself never requires the SDK.
//
// # What it owns
//
// The package owns the translation between backstop and the SDK, and
// nothing of the wire: the client sends, authenticates, signs (Bedrock),
// rewrites the URL (Bedrock, Vertex) and decodes. Provider translates an
// llm.Request into MessageNewParams exactly as the native adapter
// (provider/anthropic) writes its body (system, messages with text, image,
// document, tool_use and tool_result blocks, tools, tool_choice,
// output_config, max_tokens, temperature, top_p, stop_sequences and
// Params.Extra), translating tool-call ids the API would refuse as the
// native adapter does; it translates the SDK's Message and stream events
// back into llm.Response and llm.Chunk (text, tool calls, finish reason,
// usage with cached input, model, id, request id, rate limit); and it turns
// every error the SDK returns into an *llm.Error classified by llm.Classify
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
//	p, err := anthropicsdk.New(client, anthropicsdk.Options{APIKey: key})
//
// Amazon Bedrock (the region is given twice: the SDK does not expose the
// one in its configuration):
//
//	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion("eu-west-1"))
//	client := anthropic.NewClient(bedrock.WithConfig(cfg))
//	p, err := anthropicsdk.New(client, anthropicsdk.Options{Platform: "bedrock", Region: "eu-west-1"})
//
// Google Vertex AI:
//
//	client := anthropic.NewClient(vertex.WithGoogleAuth(ctx, "europe-west4", "my-project"))
//	p, err := anthropicsdk.New(client, anthropicsdk.Options{Platform: "vertex", Region: "europe-west4"})
//
// Name returns the OpenTelemetry gen_ai.provider.name of the platform
// ("anthropic", "aws.bedrock", "gcp.vertex_ai") unless Options.Name
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
// anthropic-ratelimit-* headers, and a middleware of its own, innermost,
// which reads the body under Options.MaxResponseBytes and learns the key or
// token the request carries, to redact it. A middleware of the client's own
// that retries by calling next more than once is beyond the provider's
// reach: do not install one. Redirects are followed or not as the client's
// *http.Client says; the SDK's default client follows them, which makes one
// attempt two requests and re-sends the body elsewhere. The native adapter
// refuses them: to do the same, build the client with
// option.WithHTTPClient(&http.Client{CheckRedirect: func(*http.Request,
// []*http.Request) error { return http.ErrUseLastResponse }}), and a 3xx
// fails the attempt with KindNotFound naming the Location, as the native
// adapter's does.
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
// encodes a block, decodes an event or reports an error fails them. Read
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

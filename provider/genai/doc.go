// Package genai is the backstop adapter over Google's official Go SDK for
// Gemini, google.golang.org/genai: one Provider for the Gemini API and for
// Vertex AI, whichever backend the client was built for. It is its own Go
// module, so that backstop itself does not depend on the SDK.
//
// # What it owns
//
// The translation between llm's vocabulary and the SDK's types, the
// classification of every SDK error into an *llm.Error (through
// classify.Classify with classify.VendorGoogle, the table backstop's own adapters
// use), the redaction of every credential, the caps on what a response
// may make it hold, and the guarantee that one Complete or Stream is one
// HTTP request to the configured origin. It does not own the
// authentication or the endpoint: the *genai.Client does.
//
// # Building the client
//
// With the SDK imported as gg "google.golang.org/genai", the Gemini API,
// with an API key:
//
//	c, err := gg.NewClient(ctx, &gg.ClientConfig{
//		Backend: gg.BackendGeminiAPI,
//		APIKey:  os.Getenv("GEMINI_API_KEY"),
//	})
//	p, err := genai.New(c, genai.Config{}) // Name "gcp.gemini", Platform "gemini"
//
// Vertex AI, with Application Default Credentials (or Credentials, or an
// HTTPClient that authenticates, such as an oauth2 client):
//
//	c, err := gg.NewClient(ctx, &gg.ClientConfig{
//		Backend:  gg.BackendVertexAI,
//		Project:  "my-project",
//		Location: "europe-west4",
//	})
//	p, err := genai.New(c, genai.Config{}) // Name "gcp.vertex_ai", Region "europe-west4"
//
// Vertex AI in express mode is Backend gg.BackendVertexAI with an APIKey
// and no project. HTTPOptions.BaseURL points the client elsewhere (a
// proxy, a test server); HTTPOptions.APIVersion picks v1 or v1beta(1).
//
// Every field of Config defaults when zero; New checks it once with
// Config.Validate, and Config.Region against the client, and every error
// it returns matches the module's invalid-configuration sentinel
// (errors.Is(err, llm.ErrInvalidConfig)) and names what to change.
//
// New does not send through the client it is given: it builds a client of
// its own from the client's configuration (ClientConfig, which NewClient
// filled in, the HTTP client included), the same in every respect but
// the HTTP client, which is a copy of the caller's (or of the one the
// SDK made) that follows no redirect and has the adapter's guard (the
// Exchange of provider/internal/wire) right under the SDK, over the
// caller's own transport. Building it again detects no credentials and
// touches no network (with an HTTP client set, the SDK does neither). The
// caller's client and HTTP client are left as they were, and the caller's
// own calls through them behave as before.
//
// # Redirects and one request
//
// Every attempt is one request, to the origin the client is configured
// with. A 3xx is never followed, whatever the caller's HTTP client would
// do (its CheckRedirect is replaced in the adapter's copy): the attempt
// fails with KindNotFound, Code "redirect", its Status the 3xx, and
// nothing reaches the host it points to (the SDK sends the key in
// x-goog-api-key, and an oauth2 transport adds the bearer to every
// request, which net/http would carry there). A transport of the caller's
// that follows redirects itself is caught after the fact: a response from
// another origin fails the attempt the same way, unread. A second request
// within one attempt (a transport that retries) is refused before it
// leaves.
//
// # Limits
//
// Config.MaxResponseBytes (8 MiB by default) caps every response body,
// error or answer, decompressed when it arrives compressed, every line and
// event of a stream, and a stream's assembled answer (its text and tool
// calls together). Past it the attempt fails, having read at most the
// cap, with a classified *llm.Error (KindServer for an answer, the
// status's kind for an error reply); the SDK never reads a body that did
// not pass the cap. A stream the cap cuts, or whose connection fails,
// ends cleanly for the SDK, and the adapter returns what happened: the
// SDK writes a stream's read errors to the process's standard logger
// (log.Printf), and through the adapter it writes nothing there but two
// warnings of its own making: when Params.Extra replaces a field of the
// request with a value of another type, and, from New, the warnings
// genai.NewClient itself printed when the environment and the
// configuration disagree (GOOGLE_API_KEY beside a project, say).
//
// # What errors and telemetry may contain
//
// An *llm.Error's Error() (and so span statuses and observe.Log records)
// holds the adapter's own words, the status, the google.rpc status name
// (an upper-case enum) and the request id; never the provider's message,
// nor the SDK's error text, which may quote the response body and so the
// prompt or the answer. Those go to Detail alone, cut to 512 bytes; the
// SDK's error is Err wrapped by wire.Opaque, whose text names only its
// type (errors.Is and errors.As see through it). A transport failure
// keeps its cause (a net error) in Err.
//
// Every credential a request carries as it leaves (x-goog-api-key, an
// Authorization bearer, a key= parameter), every credential the transport
// under the adapter's guard added (what the response's request shows: an
// oauth2 token), the client's APIKey and Config.APIKey are redacted from
// every error (Message, Detail, RequestID, Type, Code, Err's text) and
// from every answer's ID, Model, RequestID and FinishReason, a streamed
// answer's Response() and errors raised mid-stream included. A credential
// added below the guard where no response comes back (a transport that
// fails after adding it) cannot be learned: pass it as Config.APIKey.
//
// # Regions
//
// Deployment().Region is where the client sends requests, when it says:
// on Vertex AI, its Location (projects/P/locations/L in every request
// path), or "global" in express mode on the default endpoint. An
// Config.Region that contradicts it is an error from New naming both, so
// that a chain's AllowRegions is never satisfied by a declaration the
// requests do not follow. What remains the caller's word, unchecked: the
// Gemini API's region (it does not say where it processes requests), a
// Vertex AI client behind a BaseURL without a project and location (a
// proxy), express mode behind another BaseURL, and, in every case, what a
// proxy or the provider does beyond the URL the client sends to.
//
// # Retries
//
// The SDK retries when HTTPOptions.RetryOptions is set on the client (5
// attempts with exponential backoff by default, on 408, 429 and 5xx and on
// transport errors), and in the pinned version it continues an answer that
// carries a continuation token by sending the request again
// (GenerateContentConfig.AutomaticContinuation, on by default; a stream
// also reconnects after a drop past a checkpoint). Both would put a retry
// layer under the chain's. The adapter forces both off on every request:
// it sets the request's RetryOptions to {Attempts: 1}, which replaces the
// client's wholesale, and AutomaticContinuation to false; the client
// itself is left as it was. The tests use a client built to retry five
// times on every status and prove one request per attempt for every error
// class, for a dropped connection, a continuation token and a stream cut
// after a checkpoint (TestErrorClassesOneRequest,
// TestTransportErrorOneRequest, TestNoAutomaticContinuation).
//
// # Requests
//
// System becomes systemInstruction; a user message is a "user" content, an
// assistant message a "model" content. Parts: text as text; inline images
// and documents (PDF, plain text) as inlineData; media by URL as fileData
// (fileUri, with the MediaType, guessed from the extension for an image
// without one); a ToolCall as functionCall (id, name, args); a ToolResult
// as functionResponse, named after the call it answers earlier in the
// history, with response {"output": content}, or {"error": content} when
// IsError (the keys the API documents). Tools become one tool of
// functionDeclarations with parametersJsonSchema (an empty InputSchema is
// {"type":"object","properties":{}}); ToolChoice none, any and a named
// tool become functionCallingConfig NONE, ANY, and ANY with
// allowedFunctionNames; auto sends none. ResponseSchema becomes
// responseMimeType "application/json" with responseJsonSchema. MaxTokens,
// Temperature, TopP and Stop become maxOutputTokens, temperature, topP and
// stopSequences; Params.Extra is merged into the request body (objects
// recursively), through the SDK's HTTPOptions.ExtraBody.
//
// # Answers
//
// The first candidate's text (thought summaries left out), its function
// calls as ToolCalls (Arguments the JSON of args; numbers pass through the
// SDK's float64), Finish by classify.FinishOf of finishReason (STOP with tool
// calls is FinishToolUse), usage (input: promptTokenCount plus
// toolUsePromptTokenCount; output: candidatesTokenCount plus
// thoughtsTokenCount, since thinking is billed as output), Model from
// modelVersion, ID from responseId, RequestID from the response's
// X-Goog-Request-Id header, or else X-Request-Id (classify.VendorGoogle's
// names: Google documents no request-id header for these APIs, so it is
// often empty). The adapter reads it from the response itself, so that
// errors, an error event mid-stream and a cut attempt carry it as answers
// do. A blocked prompt (promptFeedback.blockReason)
// or a candidate stopped by a filter (SAFETY, PROHIBITED_CONTENT, …) is a
// KindContentFilter error.
//
// # Tool-call ids
//
// Gemini may return calls without an id: the adapter names them call_<n>,
// n counting the tool calls of the conversation (those in the request's
// history, then the answer's), or the next n free: the history may hold
// call_1 from another provider. A call whose id the conversation already
// holds (Gemini's own, echoed, or two calls of the answer with one id) is
// renamed <id>_2, as every adapter of the module renames it. So the ids
// are stable for a given request and never repeat one of the
// conversation. Ids go out as the caller gives them.
// Gemini 2.5 and later attach a thought signature to function calls, which
// must be sent back with the call when the conversation is replayed
// (Gemini 3 refuses a replayed call without it). llm.ToolCall has no field
// for it, so the adapter appends it to the id: <id>~sig~<base64url>. The id
// is opaque to callers; replayed to this adapter the signature goes back as
// the part's thoughtSignature and the id before the mark as the call's id.
// (Other adapters treat the long id as any foreign id.)
//
// # Moving the pinned SDK version
//
// The module pins google.golang.org/genai in go.mod. To move it:
//
//	cd provider/genai
//	go list -m -versions google.golang.org/genai
//	go get google.golang.org/genai@vX.Y.Z && go mod tidy
//	go test -race ./...
//
// then read the SDK's CHANGELOG for new retry or continuation behaviour
// (the tests above fail if a new version sends a second request), and
// for new fields of Part, FunctionCall and GenerateContentResponse.
//
// # Testing against the fake provider
//
// provider/fake serves the Gemini API's and Vertex AI's wire formats and
// fails on cue, so a chain of your own can be tested without a key. The
// example Fake (example_fake_test.go) points a genai client at it
// (HTTPOptions.BaseURL) in a chain whose primary's 503 is served by a
// fallback; FakeVertex does the same with a Vertex AI client.
package genai

// Package genai is the backstop adapter over Google's official Go SDK for
// Gemini, google.golang.org/genai: one Provider for the Gemini API and for
// Vertex AI, whichever backend the client was built for. It is its own Go
// module, so that backstop itself does not depend on the SDK.
//
// # What it owns
//
// The translation between llm's vocabulary and the SDK's types, the
// classification of every SDK error into an *llm.Error (through
// llm.Classify with llm.VendorGoogle, the table backstop's own adapters
// use), the redaction of the API key, and the guarantee that one Complete
// or Stream is one HTTP request. It does not own the HTTP client, the
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
//	p, err := genai.New(c, genai.Options{}) // Name "gcp.gemini", Platform "gemini"
//
// Vertex AI, with Application Default Credentials (or Credentials, or an
// HTTPClient that authenticates):
//
//	c, err := gg.NewClient(ctx, &gg.ClientConfig{
//		Backend:  gg.BackendVertexAI,
//		Project:  "my-project",
//		Location: "europe-west4",
//	})
//	p, err := genai.New(c, genai.Options{}) // Name "gcp.vertex_ai", Region "europe-west4"
//
// HTTPOptions.BaseURL points the client elsewhere (a proxy, a test
// server); HTTPOptions.APIVersion picks v1 or v1beta(1). Give the client
// an HTTPClient that follows no redirects (CheckRedirect returning
// http.ErrUseLastResponse): the SDK sends the key in x-goog-api-key, a
// header net/http re-sends to wherever a redirect points, and a redirect
// makes one attempt two requests. The adapter cannot set this for you
// without replacing your client.
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
// SDK's float64), Finish by llm.FinishOf of finishReason (STOP with tool
// calls is FinishToolUse), usage (input: promptTokenCount plus
// toolUsePromptTokenCount; output: candidatesTokenCount plus
// thoughtsTokenCount, since thinking is billed as output), Model from
// modelVersion, ID from responseId, RequestID from the response headers
// the SDK hands back (x-goog-request-id; errors carry none, as the SDK's
// APIError keeps no headers). A blocked prompt (promptFeedback.blockReason)
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
package genai

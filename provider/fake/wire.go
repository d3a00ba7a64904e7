package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Format is a wire format the fake speaks, chosen by the request's path.
type Format int

// The wire formats.
const (
	// Anthropic is the Anthropic Messages API: POST /v1/messages.
	Anthropic Format = iota + 1
	// OpenAI is the OpenAI Chat Completions API: POST /v1/chat/completions.
	OpenAI
	// Bedrock is Anthropic on Amazon Bedrock: POST /model/{modelId}/invoke
	// and /model/{modelId}/invoke-with-response-stream.
	Bedrock
	// Vertex is Anthropic on Google Vertex AI: POST
	// /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}:rawPredict
	// and :streamRawPredict.
	Vertex
	// Gemini is the Gemini API: POST /v1beta/models/{m}:generateContent and
	// :streamGenerateContent?alt=sse.
	Gemini
	// VertexGemini is Gemini on Vertex AI: POST
	// /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent
	// and :streamGenerateContent?alt=sse.
	VertexGemini
	// Azure is Azure OpenAI Chat Completions: POST
	// /openai/deployments/{deployment}/chat/completions?api-version=… and
	// /openai/v1/chat/completions.
	Azure
)

// String returns "anthropic", "openai", "bedrock", "vertex", "gemini",
// "vertex-gemini" or "azure".
func (f Format) String() string {
	switch f {
	case Anthropic:
		return "anthropic"
	case OpenAI:
		return "openai"
	case Bedrock:
		return "bedrock"
	case Vertex:
		return "vertex"
	case Gemini:
		return "gemini"
	case VertexGemini:
		return "vertex-gemini"
	case Azure:
		return "azure"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// family is the API whose bodies f carries: Anthropic (Anthropic, Bedrock,
// Vertex), OpenAI (OpenAI, Azure) or Gemini (Gemini, VertexGemini).
func (f Format) family() Format {
	switch f {
	case Bedrock, Vertex:
		return Anthropic
	case Azure:
		return OpenAI
	case VertexGemini:
		return Gemini
	}
	return f
}

// The paths the fake serves.
const (
	anthropicPath = "/v1/messages"
	openaiPath    = "/v1/chat/completions"
)

// endpoint is what a request's path says: its format and, for the formats
// that carry them in the path, its model and whether it asks for a stream.
type endpoint struct {
	format     Format
	model      string // the model (or deployment) named in the path, if any
	pathModel  bool   // the path names the model
	stream     bool   // the path asks for a stream
	pathStream bool   // the path decides streaming (Bedrock, Gemini)
	sse        bool   // Gemini streaming: alt=sse was given
	azureV1    bool   // Azure's /openai/v1 form (no api-version needed)
}

func route(u *url.URL) (endpoint, bool) {
	path := u.Path
	switch path {
	case anthropicPath:
		return endpoint{format: Anthropic}, true
	case openaiPath:
		return endpoint{format: OpenAI}, true
	case "/openai/v1/chat/completions":
		return endpoint{format: Azure, azureV1: true}, true
	}
	if rest, ok := strings.CutPrefix(path, "/model/"); ok {
		for _, m := range []struct {
			suffix string
			stream bool
		}{{"/invoke-with-response-stream", true}, {"/invoke", false}} {
			if id, ok := strings.CutSuffix(rest, m.suffix); ok && id != "" {
				return endpoint{format: Bedrock, model: id, pathModel: true, stream: m.stream, pathStream: true}, true
			}
		}
		return endpoint{}, false
	}
	if rest, ok := strings.CutPrefix(path, "/openai/deployments/"); ok {
		if d, ok := strings.CutSuffix(rest, "/chat/completions"); ok && d != "" && !strings.Contains(d, "/") {
			return endpoint{format: Azure, model: d, pathModel: true}, true
		}
		return endpoint{}, false
	}
	// Google: {version}/models/{m}:{method} (Gemini API),
	// {version}/projects/{p}/locations/{l}/publishers/{pub}/models/{m}:{method}
	// or, in Vertex express mode, {version}/publishers/google/models/{m}:{method}.
	ver, rest, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if !ok || (ver != "v1" && ver != "v1beta" && ver != "v1beta1") {
		return endpoint{}, false
	}
	i := strings.LastIndex(rest, ":")
	if i < 0 {
		return endpoint{}, false
	}
	resource, method := rest[:i], rest[i+1:]
	var ep endpoint
	var name string
	if m, ok := strings.CutPrefix(resource, "models/"); ok && ver != "v1beta1" {
		ep.format, name = Gemini, m
	} else {
		if strings.HasPrefix(resource, "publishers/google/") {
			resource = "projects/-/locations/-/" + resource // Vertex express mode: no project
		}
		parts := strings.Split(resource, "/")
		if len(parts) != 8 || parts[0] != "projects" || parts[2] != "locations" || parts[4] != "publishers" ||
			parts[6] != "models" || parts[1] == "" || parts[3] == "" {
			return endpoint{}, false
		}
		switch parts[5] {
		case "anthropic":
			ep.format = Vertex
		case "google":
			ep.format = VertexGemini
		default:
			return endpoint{}, false
		}
		name = parts[7]
	}
	if name == "" || strings.Contains(name, "/") {
		return endpoint{}, false
	}
	ep.model, ep.pathModel = name, true
	switch {
	case ep.format == Vertex && method == "rawPredict":
	case ep.format == Vertex && method == "streamRawPredict":
		ep.stream = true
	case ep.format != Vertex && method == "generateContent":
		ep.pathStream = true
	case ep.format != Vertex && method == "streamGenerateContent":
		ep.stream, ep.pathStream = true, true
		ep.sse = u.Query().Get("alt") == "sse"
	default:
		return endpoint{}, false
	}
	return ep, true
}

// requestIDHeader is the header each format carries its request id in ("":
// none).
func requestIDHeader(f Format) string {
	switch f {
	case Anthropic, Vertex:
		return "Request-Id"
	case Bedrock:
		return "X-Amzn-Requestid"
	case Gemini, VertexGemini:
		return ""
	}
	return "X-Request-Id"
}

// setRequestID sets the request id header of format f (Azure sends it as
// apim-request-id and x-request-id).
func setRequestID(h http.Header, f Format, rid string) {
	if k := requestIDHeader(f); k != "" {
		h.Set(k, rid)
	}
	if f == Azure {
		h.Set("Apim-Request-Id", rid)
	}
}

// exchange is what the response to one request needs to know about it.
type exchange struct {
	format Format
	model  string   // the model requested
	seq    int      // the server's request sequence number
	reqLen int      // bytes of request body, for the usage estimate
	stop   string   // the request's first stop sequence, if any
	stream bool     // the request asked for a stream ("stream": true)
	usage  bool     // OpenAI: stream_options.include_usage is true
	n      int      // OpenAI: the choices asked for ("n"), 1 by default
	limits []header // the rate-limit headers
}

// request is the part of a request body the fake looks at.
type request struct {
	model  string
	stop   string
	stream bool // "stream": true
	usage  bool // "stream_options": {"include_usage": true}
	fields map[string]json.RawMessage
	err    error // the body is not a JSON object
}

func parseRequest(body []byte) request {
	var r request
	if err := json.Unmarshal(body, &r.fields); err != nil {
		r.err = err
		return r
	}
	if r.fields == nil {
		r.err = fmt.Errorf("the body is null, not an object")
		return r
	}
	_ = json.Unmarshal(r.fields["model"], &r.model)
	var stops []string
	if json.Unmarshal(r.fields["stop_sequences"], &stops) == nil && len(stops) > 0 {
		r.stop = stops[0]
	}
	_ = json.Unmarshal(r.fields["stream"], &r.stream)
	var opts struct {
		IncludeUsage bool `json:"include_usage"`
	}
	if json.Unmarshal(r.fields["stream_options"], &opts) == nil {
		r.usage = opts.IncludeUsage
	}
	return r
}

func isString(raw json.RawMessage) bool {
	var s string
	return raw != nil && json.Unmarshal(raw, &s) == nil
}

// isBoolOrAbsent reports whether a field is absent, null or a boolean.
func isBoolOrAbsent(raw json.RawMessage) bool {
	var b *bool
	return raw == nil || json.Unmarshal(raw, &b) == nil
}

// jsonKind names the JSON type of raw as OpenAI's type errors do: "a
// string", "an integer", …
func jsonKind(raw json.RawMessage) string {
	switch t := bytes.TrimSpace(raw); {
	case len(t) == 0:
		return "nothing"
	case t[0] == '"':
		return "a string"
	case t[0] == '{':
		return "an object"
	case t[0] == '[':
		return "an array"
	case bytes.ContainsAny(t, ".eE"):
		return "a decimal"
	default:
		return "an integer"
	}
}

// marshal encodes v as the real APIs do: compact, without HTML escaping.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic("fake: " + err.Error()) // only fixed struct types are encoded
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// estimate is the fake's token count for n bytes: one per four, at least one.
func estimate(n int) int { return max(1, (n+3)/4) }

// anthropicMessage is a complete message, or, in message_start, the empty
// message a stream begins with (no content, stop_reason null).
type anthropicMessage struct {
	ID           string          `json:"id"`
	Type         string          `json:"type"`
	Role         string          `json:"role"`
	Model        string          `json:"model"`
	Content      []any           `json:"content"`
	StopReason   *string         `json:"stop_reason"`
	StopSequence *string         `json:"stop_sequence"`
	StopDetails  json.RawMessage `json:"stop_details"`
	Container    json.RawMessage `json:"container"`
	Diagnostics  json.RawMessage `json:"diagnostics"`
	Usage        anthropicUsage  `json:"usage"`
}

// anthropicBlock is a text block or a delta of one.
type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// anthropicTextBlock is a text block of a complete message.
type anthropicTextBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Citations json.RawMessage `json:"citations"`
}

type anthropicToolUse struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Name   string          `json:"name"`
	Input  json.RawMessage `json:"input"`
	Caller typeOnly        `json:"caller"`
}

type anthropicUsage struct {
	InputTokens              int                     `json:"input_tokens"`
	CacheCreationInputTokens int                     `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int                     `json:"cache_read_input_tokens"`
	CacheCreation            *anthropicCacheCreation `json:"cache_creation,omitempty"`
	OutputTokens             int                     `json:"output_tokens"`
	OutputTokensDetails      *anthropicOutputDetails `json:"output_tokens_details,omitempty"`
	ServerToolUse            *anthropicServerToolUse `json:"server_tool_use,omitempty"`
	ServiceTier              string                  `json:"service_tier,omitempty"`
	InferenceGeo             string                  `json:"inference_geo,omitempty"`
	Speed                    string                  `json:"speed,omitempty"`
}

type anthropicCacheCreation struct {
	Ephemeral5m int `json:"ephemeral_5m_input_tokens"`
	Ephemeral1h int `json:"ephemeral_1h_input_tokens"`
}

type anthropicOutputDetails struct {
	ThinkingTokens int `json:"thinking_tokens"`
}

type anthropicServerToolUse struct {
	WebSearchRequests int `json:"web_search_requests"`
	WebFetchRequests  int `json:"web_fetch_requests"`
}

// usage is the full usage object of a message (and of message_start).
func (a answer) anthropicUsage(out int) anthropicUsage {
	return anthropicUsage{
		InputTokens: a.uncached(), CacheReadInputTokens: a.cached, CacheCreationInputTokens: a.written,
		CacheCreation: &anthropicCacheCreation{Ephemeral5m: a.written}, OutputTokens: out,
		OutputTokensDetails: &anthropicOutputDetails{}, ServerToolUse: &anthropicServerToolUse{},
		ServiceTier: "standard", InferenceGeo: "global", Speed: "standard",
	}
}

// uncached is Anthropic's input_tokens: the input tokens neither read
// from nor written to the cache.
func (a answer) uncached() int { return a.in - a.cached - a.written }

// deltaUsage is the cumulative usage of message_delta.
func (a answer) anthropicDeltaUsage() anthropicUsage {
	return anthropicUsage{
		InputTokens: a.uncached(), CacheReadInputTokens: a.cached, CacheCreationInputTokens: a.written, OutputTokens: a.out,
		OutputTokensDetails: &anthropicOutputDetails{}, ServerToolUse: &anthropicServerToolUse{},
	}
}

// stopDetails is a message's stop_details: null but for a refusal.
func (a answer) stopDetails() json.RawMessage {
	if a.refusal {
		return json.RawMessage(`{"type":"refusal","category":null,"explanation":null}`)
	}
	return jsonNull
}

type anthropicError struct {
	Type      string               `json:"type"`
	Error     anthropicErrorDetail `json:"error"`
	RequestID string               `json:"request_id"`
}

type anthropicErrorDetail struct {
	Type    string                 `json:"type"`
	Message string                 `json:"message"`
	Details *anthropicErrorDetails `json:"details,omitempty"`
}

type anthropicErrorDetails struct {
	ErrorCode string `json:"error_code"`
}

type openaiCompletion struct {
	ID                string         `json:"id"`
	Object            string         `json:"object"`
	Created           int64          `json:"created"`
	Model             string         `json:"model"`
	Choices           []openaiChoice `json:"choices"`
	Usage             openaiUsage    `json:"usage"`
	ServiceTier       string         `json:"service_tier"`
	SystemFingerprint string         `json:"system_fingerprint"`
}

type openaiChoice struct {
	Index        int           `json:"index"`
	Message      openaiMessage `json:"message"`
	Logprobs     *struct{}     `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

type openaiMessage struct {
	Role        string           `json:"role"`
	Content     *string          `json:"content"`
	Refusal     *string          `json:"refusal"`
	ToolCalls   []openaiToolCall `json:"tool_calls,omitempty"`
	Annotations []struct{}       `json:"annotations"`
}

type openaiToolCall struct {
	Index    *int               `json:"index,omitempty"` // in stream deltas only
	ID       string             `json:"id,omitempty"`
	Type     string             `json:"type,omitempty"`
	Function openaiToolFunction `json:"function"`
}

type openaiToolFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

type openaiUsage struct {
	PromptTokens            int                    `json:"prompt_tokens"`
	CompletionTokens        int                    `json:"completion_tokens"`
	TotalTokens             int                    `json:"total_tokens"`
	PromptTokensDetails     openaiPromptDetails    `json:"prompt_tokens_details"`
	CompletionTokensDetails openaiCompletionDetail `json:"completion_tokens_details"`
}

type openaiPromptDetails struct {
	CachedTokens int `json:"cached_tokens"`
	AudioTokens  int `json:"audio_tokens"`
}

type openaiCompletionDetail struct {
	ReasoningTokens          int `json:"reasoning_tokens"`
	AudioTokens              int `json:"audio_tokens"`
	AcceptedPredictionTokens int `json:"accepted_prediction_tokens"`
	RejectedPredictionTokens int `json:"rejected_prediction_tokens"`
}

func (a answer) openaiUsage() openaiUsage {
	return openaiUsage{PromptTokens: a.in, CompletionTokens: a.out, TotalTokens: a.in + a.out,
		PromptTokensDetails: openaiPromptDetails{CachedTokens: a.cached}}
}

// The service_tier and system_fingerprint of OpenAI answers.
const (
	openaiServiceTier = "default"
	openaiFingerprint = "fp_fake"
)

type openaiError struct {
	Error openaiErrorDetail `json:"error"`
}

type openaiErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// answer is what an answer outcome says, in either format and either shape
// (one body or a stream).
type answer struct {
	text    string
	model   string  // the model that says it served the request
	id      string  // msg_… or chatcmpl-…
	finish  string  // stop_reason or finish_reason
	stop    *string // Anthropic stop_sequence
	in      int     // input (prompt) tokens
	out     int     // output (completion) tokens
	cached  int     // input tokens read from the prompt cache
	written int     // input tokens written to the prompt cache
	tools   []toolCall
	refusal bool
	n       int // OpenAI choices
}

func answerOf(o Outcome, ex exchange) answer {
	a := answer{text: o.text.or("fake answer from " + ex.model), model: ex.model, id: o.id, finish: o.finish,
		tools: resolveTools(o.tools, ex.format.family(), ex.seq), refusal: o.refusal, cached: o.cached, written: o.written, n: max(ex.n, 1)}
	if o.model != "" {
		a.model = o.model
	}
	outLen := len(a.text)
	for _, t := range a.tools {
		outLen += len(t.name) + len(t.args)
	}
	a.in, a.out = estimate(ex.reqLen), estimate(outLen)
	if o.usageSet {
		a.in, a.out = o.usageIn, o.usageOut
	}
	a.in = max(a.in, a.cached+a.written) // the cache's tokens are input tokens
	switch ex.format.family() {
	case Gemini:
		return geminiAnswer(a, o, ex)
	case Anthropic:
		if a.id == "" {
			a.id = "msg_fake_" + strconv.Itoa(ex.seq)
		}
		switch {
		case a.finish != "":
		case len(a.tools) > 0:
			a.finish = "tool_use"
		case a.refusal:
			a.finish = "refusal"
		default:
			a.finish = "end_turn"
		}
		if a.finish == "stop_sequence" && ex.stop != "" {
			a.stop = &ex.stop
		}
		return a
	}
	if a.id == "" {
		a.id = "chatcmpl-fake-" + strconv.Itoa(ex.seq)
	}
	if a.finish == "" {
		a.finish = "stop"
		if len(a.tools) > 0 {
			a.finish = "tool_calls"
		}
	}
	return a
}

// anthropicContent is the content of a complete Anthropic message: the text
// block (left out when the text is empty and there are tool calls) and the
// tool_use blocks.
func (a answer) anthropicContent() []any {
	var content []any
	if a.text != "" || len(a.tools) == 0 {
		content = append(content, anthropicTextBlock{Type: "text", Text: a.text, Citations: jsonNull})
	}
	for _, t := range a.tools {
		content = append(content, anthropicToolUse{Type: "tool_use", ID: t.id, Name: t.name,
			Input: json.RawMessage(t.args), Caller: typeOnly{"direct"}})
	}
	return content
}

// openaiMessage is the message of a complete OpenAI choice.
func (a answer) openaiMessage() openaiMessage {
	m := openaiMessage{Role: "assistant", Annotations: []struct{}{}}
	text := a.text
	switch {
	case a.refusal:
		m.Refusal = &text
	case text == "" && len(a.tools) > 0:
	default:
		m.Content = &text
	}
	for _, t := range a.tools {
		m.ToolCalls = append(m.ToolCalls, openaiToolCall{ID: t.id, Type: "function",
			Function: openaiToolFunction{Name: t.name, Arguments: t.args}})
	}
	return m
}

// answerBody is the success body of an answer outcome.
func answerBody(o Outcome, ex exchange) []byte {
	a := answerOf(o, ex)
	switch ex.format.family() {
	case Gemini:
		return geminiBody(a)
	case Anthropic:
		return marshal(anthropicMessage{
			ID: a.id, Type: "message", Role: "assistant", Model: a.model,
			Content:    a.anthropicContent(),
			StopReason: &a.finish, StopSequence: a.stop, StopDetails: a.stopDetails(),
			Container: jsonNull, Diagnostics: jsonNull,
			Usage: a.anthropicUsage(a.out),
		})
	}
	choices := make([]openaiChoice, a.n)
	for i := range choices {
		choices[i] = openaiChoice{Index: i, Message: a.openaiMessage(), FinishReason: a.finish}
	}
	return marshal(openaiCompletion{
		ID: a.id, Object: "chat.completion", Created: time.Now().Unix(), Model: a.model,
		Choices: choices, Usage: a.openaiUsage(),
		ServiceTier: openaiServiceTier, SystemFingerprint: openaiFingerprint,
	})
}

var anthropicTypes = map[int]string{
	400: "invalid_request_error",
	401: "authentication_error",
	402: "billing_error",
	403: "permission_error",
	404: "not_found_error",
	409: "conflict_error",
	413: "request_too_large",
	429: "rate_limit_error",
	500: "api_error",
	504: "timeout_error",
	529: "overloaded_error",
}

var anthropicMessages = map[int]string{
	400: "Invalid request",
	401: "invalid x-api-key",
	402: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits.",
	403: "Your API key does not have permission to use the specified resource.",
	409: "Conflict",
	413: "Request exceeds the maximum allowed number of bytes.",
	429: "This request would exceed the rate limit for your organization of 50 requests per minute. For details, refer to: https://docs.claude.com/en/api/rate-limits.",
	500: "Internal server error",
	504: "Request timeout",
	529: "Overloaded",
}

var openaiMessages = map[int]string{
	400: "Invalid request.",
	401: "Incorrect API key provided.",
	403: "You are not allowed to access this resource.",
	500: "The server had an error while processing your request. Sorry about that!",
	503: "The server is overloaded or not ready yet.",
}

// errorStatus is the HTTP status an error outcome has in format f.
func errorStatus(o Outcome, f Format) int {
	switch {
	case o.preset == presetOverloaded && f != Anthropic && f != Vertex:
		return 503 // only Anthropic's own API (and Vertex, passing it through) sends 529
	case o.preset == presetSpendCap && f == Bedrock:
		return 400 // ServiceQuotaExceededException
	}
	return o.status
}

// errorBody is the body of an error outcome, its status and any headers
// the format adds.
func errorBody(o Outcome, ex exchange, requestID string) (int, []byte, []header) {
	switch ex.format {
	case Bedrock:
		return bedrockError(o, ex)
	case Gemini, VertexGemini:
		return googleError(o, ex)
	case Vertex:
		if status, body, ok := vertexError(o, ex); ok {
			return status, body, nil
		}
	case Azure:
		if status, body, ok := azureError(o, ex); ok {
			return status, body, nil
		}
	}
	status, body := providerError(o, ex, requestID)
	return status, body, nil
}

// providerError is the Anthropic or OpenAI error body of an error outcome,
// and its status.
func providerError(o Outcome, ex exchange, requestID string) (int, []byte) {
	status := errorStatus(o, ex.format)
	if ex.format.family() == Anthropic {
		typ := statusName(anthropicTypes, status, "invalid_request_error", "api_error")
		msg := statusMessage(anthropicMessages, status)
		if status == 404 {
			msg = "model: " + ex.model
		}
		var code string
		switch o.preset {
		case presetSpendCap:
			msg = "You have reached your specified API usage limits. You will regain access when the limit resets."
			code = "enforced_spend_limit_reached"
		case presetContextTooLong:
			msg = "prompt is too long: 208310 tokens > 200000 maximum"
		}
		e := anthropicError{Type: "error", RequestID: requestID, Error: anthropicErrorDetail{
			Type: o.errType.or(typ), Message: o.message.or(msg),
		}}
		if c := o.code.or(code); c != "" {
			e.Error.Details = &anthropicErrorDetails{ErrorCode: c}
		}
		return status, marshal(e)
	}

	typ := statusName(nil, status, "invalid_request_error", "server_error")
	code, param := "", ""
	msg, ok := openaiMessages[status]
	if !ok {
		msg = http.StatusText(status) + "."
	}
	switch status {
	case 401:
		code = "invalid_api_key"
	case 404:
		code = "model_not_found"
		msg = "The model `" + ex.model + "` does not exist or you do not have access to it."
	case 429:
		typ, code = "requests", "rate_limit_exceeded"
		msg = "Rate limit reached for " + ex.model + " in organization org-fake on requests per min (RPM): Limit 60, Used 60, Requested 1."
		if wait, ok := retryAfterSeconds(o); ok {
			msg += " Please try again in " + wait.String() + "."
		}
	}
	switch o.preset {
	case presetSpendCap:
		typ, code = "insufficient_quota", "insufficient_quota"
		msg = "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."
	case presetContextTooLong:
		code, param = "context_length_exceeded", "messages"
		msg = "This model's maximum context length is 128000 tokens. However, your messages resulted in 208310 tokens. Please reduce the length of the messages."
	}
	e := openaiError{Error: openaiErrorDetail{
		Message: o.message.or(msg), Type: o.errType.or(typ),
		Param: nullable(o.param.or(param)), Code: nullable(o.code.or(code)),
	}}
	return status, marshal(e)
}

// statusName is names[status], or, for a status names lacks, client for a
// 4xx status and server for any other: the error type or code each
// provider's error body carries.
func statusName(names map[int]string, status int, client, server string) string {
	if name, ok := names[status]; ok {
		return name
	}
	if status >= 400 && status < 500 {
		return client
	}
	return server
}

// statusMessage is messages[status], or the status text for a status
// messages lacks.
func statusMessage(messages map[int]string, status int) string {
	if msg, ok := messages[status]; ok {
		return msg
	}
	return http.StatusText(status)
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// retryAfterSeconds is the outcome's retry-after header as a duration, when
// it is a number of seconds.
func retryAfterSeconds(o Outcome) (time.Duration, bool) {
	v := ""
	for _, h := range o.headers {
		if http.CanonicalHeaderKey(h.k) == "Retry-After" {
			v = h.v
		}
	}
	if v == "" || strings.ContainsFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' }) {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f > 1e6 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)).Round(time.Millisecond), true
}

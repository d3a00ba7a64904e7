package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
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
)

// String returns "anthropic" or "openai".
func (f Format) String() string {
	switch f {
	case Anthropic:
		return "anthropic"
	case OpenAI:
		return "openai"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// The paths the fake serves.
const (
	anthropicPath = "/v1/messages"
	openaiPath    = "/v1/chat/completions"
)

func route(path string) (Format, bool) {
	switch path {
	case anthropicPath:
		return Anthropic, true
	case openaiPath:
		return OpenAI, true
	}
	return 0, false
}

// requestIDHeader is the header each format carries its request id in.
func requestIDHeader(f Format) string {
	if f == Anthropic {
		return "Request-Id"
	}
	return "X-Request-Id"
}

// exchange is what the response to one request needs to know about it.
type exchange struct {
	format Format
	model  string // the model requested
	seq    int    // the server's request sequence number
	reqLen int    // bytes of request body, for the usage estimate
	stop   string // the request's first stop sequence, if any
	stream bool   // the request asked for a stream ("stream": true)
	usage  bool   // OpenAI: stream_options.include_usage is true
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

// reject returns the error a real API would answer an invalid request with,
// or nil when the request is acceptable. Authentication is checked first, as
// the real APIs do.
func reject(f Format, h http.Header, r request) *Outcome {
	if f == Anthropic {
		return rejectAnthropic(h, r)
	}
	return rejectOpenAI(h, r)
}

func invalid(status int, msg string) *Outcome {
	o := Status(status).Message(msg)
	return &o
}

func invalidParam(msg, param, code string) *Outcome {
	o := Status(400).Message(msg).Code(code)
	o.param = set(param)
	return &o
}

func rejectAnthropic(h http.Header, r request) *Outcome {
	if h.Get("X-Api-Key") == "" {
		return invalid(401, "x-api-key header is required")
	}
	if h.Get("Anthropic-Version") == "" {
		return invalid(400, "anthropic-version: header is required")
	}
	if r.err != nil {
		return invalid(400, "There was an error parsing the body of your request: "+r.err.Error())
	}
	if !isString(r.fields["model"]) {
		return invalid(400, "model: Field required")
	}
	if r.model == "" {
		return invalid(400, "model: String should have at least 1 character")
	}
	mt, ok := r.fields["max_tokens"]
	if !ok {
		return invalid(400, "max_tokens: Field required")
	}
	var n int
	if json.Unmarshal(mt, &n) != nil {
		return invalid(400, "max_tokens: Input should be a valid integer")
	}
	if n < 1 {
		return invalid(400, "max_tokens: Input should be greater than or equal to 1")
	}
	msgs, ok := r.fields["messages"]
	if !ok {
		return invalid(400, "messages: Field required")
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(msgs, &list) != nil {
		return invalid(400, "messages: Input should be a valid list of message objects")
	}
	if len(list) == 0 {
		return invalid(400, "messages: at least one message is required")
	}
	for i, m := range list {
		var role string
		_ = json.Unmarshal(m["role"], &role)
		if role != "user" && role != "assistant" {
			return invalid(400, fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i))
		}
		if _, ok := m["content"]; !ok {
			return invalid(400, fmt.Sprintf("messages.%d.content: Field required", i))
		}
	}
	if !isBoolOrAbsent(r.fields["stream"]) {
		return invalid(400, "stream: Input should be a valid boolean")
	}
	return nil
}

func rejectOpenAI(h http.Header, r request) *Outcome {
	auth := h.Get("Authorization")
	if auth == "" {
		o := Status(401).Message("You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).").Code("")
		return &o
	}
	if scheme, key, _ := strings.Cut(auth, " "); !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(key) == "" {
		return invalid(401, "Incorrect API key provided.")
	}
	if r.err != nil {
		return invalid(400, "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)")
	}
	if r.model == "" {
		return invalid(400, "you must provide a model parameter")
	}
	msgs, ok := r.fields["messages"]
	if !ok {
		return invalidParam("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
	}
	var list []map[string]json.RawMessage
	if json.Unmarshal(msgs, &list) != nil {
		return invalidParam("Invalid type for 'messages': expected an array of objects.", "messages", "invalid_type")
	}
	if len(list) == 0 {
		return invalidParam("Invalid 'messages': empty array. Expected an array with minimum length 1, but got an empty array instead.", "messages", "empty_array")
	}
	for i, m := range list {
		var role string
		_ = json.Unmarshal(m["role"], &role)
		switch role {
		case "system", "developer", "user", "assistant", "tool", "function":
		default:
			return invalidParam(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.", role),
				fmt.Sprintf("messages[%d].role", i), "invalid_value")
		}
	}
	if raw := r.fields["stream"]; !isBoolOrAbsent(raw) {
		return invalidParam("Invalid type for 'stream': expected a boolean, but got "+jsonKind(raw)+" instead.", "stream", "invalid_type")
	}
	if raw := r.fields["stream_options"]; !r.stream && raw != nil && string(raw) != "null" {
		o := Status(400).Message("The 'stream_options' parameter is only allowed when 'stream' is enabled.").Code("")
		o.param = set("stream_options")
		return &o
	}
	return nil
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

type anthropicMessage struct {
	ID           string           `json:"id"`
	Type         string           `json:"type"`
	Role         string           `json:"role"`
	Model        string           `json:"model"`
	Content      []anthropicBlock `json:"content"`
	StopReason   string           `json:"stop_reason"`
	StopSequence *string          `json:"stop_sequence"`
	Usage        anthropicUsage   `json:"usage"`
}

type anthropicBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
	OutputTokens             int `json:"output_tokens"`
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
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []openaiChoice `json:"choices"`
	Usage   openaiUsage    `json:"usage"`
}

type openaiChoice struct {
	Index        int           `json:"index"`
	Message      openaiMessage `json:"message"`
	Logprobs     *struct{}     `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

type openaiMessage struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type openaiUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

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
	text   string
	model  string  // the model that says it served the request
	id     string  // msg_… or chatcmpl-…
	finish string  // stop_reason or finish_reason
	stop   *string // Anthropic stop_sequence
	in     int     // input (prompt) tokens
	out    int     // output (completion) tokens
}

func answerOf(o Outcome, ex exchange) answer {
	a := answer{text: o.text.or("fake answer from " + ex.model), model: ex.model, id: o.id, finish: o.finish}
	if o.model != "" {
		a.model = o.model
	}
	a.in, a.out = estimate(ex.reqLen), estimate(len(a.text))
	if o.usageSet {
		a.in, a.out = o.usageIn, o.usageOut
	}
	if ex.format == Anthropic {
		if a.id == "" {
			a.id = "msg_fake_" + strconv.Itoa(ex.seq)
		}
		if a.finish == "" {
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
	}
	return a
}

// answerBody is the success body of an answer outcome.
func answerBody(o Outcome, ex exchange) []byte {
	a := answerOf(o, ex)
	if ex.format == Anthropic {
		return marshal(anthropicMessage{
			ID: a.id, Type: "message", Role: "assistant", Model: a.model,
			Content:    []anthropicBlock{{Type: "text", Text: a.text}},
			StopReason: a.finish, StopSequence: a.stop,
			Usage: anthropicUsage{InputTokens: a.in, OutputTokens: a.out},
		})
	}
	return marshal(openaiCompletion{
		ID: a.id, Object: "chat.completion", Created: time.Now().Unix(), Model: a.model,
		Choices: []openaiChoice{{
			Message:      openaiMessage{Role: "assistant", Content: a.text},
			FinishReason: a.finish,
		}},
		Usage: openaiUsage{PromptTokens: a.in, CompletionTokens: a.out, TotalTokens: a.in + a.out},
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
	if o.preset == presetOverloaded && f == OpenAI {
		return 503
	}
	return o.status
}

// errorBody is the body of an error outcome, and its status.
func errorBody(o Outcome, ex exchange, requestID string) (int, []byte) {
	status := errorStatus(o, ex.format)
	if ex.format == Anthropic {
		typ, ok := anthropicTypes[status]
		if !ok {
			typ = "api_error"
			if status >= 400 && status < 500 {
				typ = "invalid_request_error"
			}
		}
		msg, ok := anthropicMessages[status]
		switch {
		case status == 404:
			msg = "model: " + ex.model
		case !ok:
			msg = http.StatusText(status)
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

	typ, code, param := "invalid_request_error", "", ""
	if status >= 500 || status < 400 {
		typ = "server_error"
	}
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

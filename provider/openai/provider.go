// Package openai is the backstop adapter for the OpenAI Chat Completions API
// and the many servers that speak it (Azure OpenAI, vLLM, Ollama, gateways).
// It owns that wire format: the request body, the response and error bodies,
// the streamed chunks, the x-request-id and x-ratelimit-* headers, and the
// mapping of OpenAI's error codes onto llm.Kind. A Provider makes
// exactly one HTTP request per Complete or Stream; retries, waits and
// fallbacks belong to the chain.
//
// Whole conversations travel through it: text, images (inline as data:
// URLs, or by URL), inline documents (a PDF as a file part, plain text as
// text), tools, the model's tool calls and the caller's tool results, and
// native structured output (Request.ResponseSchema as a strict json_schema
// response format; see Provider.CheckResponseSchema for what strict mode
// takes). Where llm's vocabulary and the wire differ:
//
//   - a user message's tool results become one "tool" message each,
//     placed before the rest of that message (they answer the assistant
//     message before it);
//   - a tool message has no field saying the tool failed: a ToolResult
//     with IsError goes out with its Content prefixed by "Error: ";
//   - a tool-call id OpenAI would refuse (it takes at most 40 bytes; the
//     adapter sends only letters, digits, _ and -), such as one another
//     provider issued, goes out as call_ and 24 hex digits, and an answer
//     echoing it comes back as the caller's id;
//   - a call's arguments are a JSON string on the wire: they come back as
//     the JSON text the model wrote ({} when empty), or as a JSON string
//     holding that text when it is not valid JSON, so that
//     ToolCall.Arguments is always JSON;
//   - a call the server sent without an id gets a fresh one, call_<n> (n
//     counting the calls of the conversation), so that it can be answered;
//     one whose id the conversation already holds (another provider's, or
//     an earlier call of the answer: a server may answer two calls with
//     one id) is renamed <id>_2 (see wire.CallIDs), so that no two calls
//     share an id; one without a name is dropped;
//   - a document by URL cannot be sent (Capabilities leaves it out).
//
// Every field of Config but APIKey defaults when zero; New checks it once
// with Config.Validate, and every error it returns matches the module's
// invalid-configuration sentinel (errors.Is(err, llm.ErrInvalidConfig))
// and names what to change.
package openai

import (
	"context"
	"net/http"
	"strings"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

const (
	// defaultBaseURL is the OpenAI API used when Config.BaseURL is empty.
	defaultBaseURL = "https://api.openai.com"
	// defaultPath is the endpoint path used when Config.Path is empty.
	defaultPath = "/v1/chat/completions"
	// defaultName is what Name returns when Config.Name is empty.
	defaultName = "openai"
)

// Config configures a Provider. Every field's zero value is its documented
// default except APIKey's, which is required: Config{APIKey: key} sends to
// api.openai.com. New checks it with Validate.
type Config struct {
	// APIKey authenticates every request, as "Authorization: Bearer <key>"
	// unless KeyHeader says otherwise. Required: for a local server that
	// checks no key, any placeholder will do. It never appears in an error
	// or an answer's metadata: the adapter redacts it from everything it
	// quotes. A key of 16 bytes or more (every key OpenAI or Azure issues)
	// is redacted wherever it appears; a shorter one (a placeholder such as
	// "none") cannot be told apart from ordinary text, so it is redacted
	// only where it stands as a whole token, not touching a letter, a digit,
	// '_' or '-' ("key=none;", a header holding just the key): a request id
	// or a model name that merely contains its letters stays intact. A key
	// with a control character (a file's trailing newline) or leading or
	// trailing spaces is an error.
	APIKey string

	// BaseURL is the scheme, host and optional path prefix of the server,
	// to which Path is appended (a trailing slash is ignored). It must be
	// an absolute http or https URL with a host, and carry no query,
	// fragment, or leading or trailing spaces. Empty means https://api.openai.com.
	BaseURL string

	// Path is the endpoint's path under BaseURL, starting with "/"; it may
	// carry a query. Empty means "/v1/chat/completions". Set
	// it for compatible servers mounted elsewhere: "/chat/completions",
	// "/openai/v1/chat/completions", or for Azure OpenAI's deployment URLs
	// "/openai/deployments/NAME/chat/completions?api-version=2024-10-21".
	// A fragment (which would never be sent) or leading or trailing spaces
	// are an error.
	Path string

	// Name is what Name returns, labelling errors and telemetry: the
	// OpenTelemetry GenAI provider name of the endpoint, such as
	// "azure.ai.openai". Empty means "openai". Leading or
	// trailing spaces are an error.
	Name string

	// KeyHeader names the header that carries APIKey. Empty means
	// "Authorization", sent as "Bearer <key>"; any other name sends the key
	// bare, as Azure OpenAI's "api-key" header expects. A name that is not
	// a header name ("api key", "api-key:") is an error.
	KeyHeader string

	// LegacyMaxTokens sends llm.Params.MaxTokens as max_tokens, for older
	// compatible servers that do not know max_completion_tokens. False
	// means max_completion_tokens, which OpenAI's reasoning models require.
	// Either way a MaxTokens of 0 sends neither field.
	LegacyMaxTokens bool

	// HTTPClient sends the requests. Nil means http.DefaultClient. Give it
	// no retrying RoundTripper: the chain owns retries. Per-attempt
	// timeouts come from the context passed to Complete. Its
	// CheckRedirect is not used: the adapter sends with a copy that
	// refuses every redirect, since following one would send the API key
	// and the request to wherever the server pointed, and make one attempt
	// two requests. A 3xx fails the attempt with KindNotFound, naming the
	// Location. (A RoundTripper that follows redirects itself is beyond
	// the adapter's reach: do not give it one.)
	HTTPClient *http.Client

	// Header holds extra headers sent with every request
	// (OpenAI-Organization, OpenAI-Project, …). A header named here replaces
	// the adapter's own of that name. Nil sends none. A name that is not a
	// header name, a value with a control character other than tab, or two
	// spellings of one name ("openai-project" and "OpenAI-Project") is an
	// error: net/http would refuse the first two on every request.
	Header http.Header

	// MaxResponseBytes caps the response body read, success or error; a
	// longer body fails the attempt with an *llm.Error instead of being
	// read. A stream, whose length has no bound, is capped per line, per
	// event, in its assembled text and in its assembled tool calls instead.
	// Zero means 8 MiB; negative is an error.
	MaxResponseBytes int64
}

// Provider sends requests to a Chat Completions endpoint. It implements
// llm.Provider, llm.StreamProvider, llm.CapableProvider and
// llm.SchemaChecker, and is safe for concurrent use. Create one with New.
type Provider struct {
	ep     wire.Endpoint
	legacy bool
}

var _ llm.Provider = (*Provider)(nil)

// errHead heads every configuration error of the package; it matches the
// module's invalid-configuration sentinel (llm.ErrInvalidConfig).
var errHead = problems.Head("openai: invalid configuration")

// Validate reports every problem of c at once, each naming the field and
// what to change; nil when New would take c. Errors match the module's
// invalid-configuration sentinel (errors.Is(err, llm.ErrInvalidConfig)).
// New calls it; call it yourself to check a configuration read from a
// file before building a provider.
func (c Config) Validate() error {
	found := problems.New(errHead)
	if c.APIKey == "" {
		found.Addf("Config.APIKey is empty; set it to the API key (for a server that checks none, any placeholder such as \"none\")")
	} else if err := wire.Key(c.APIKey); err != nil {
		found.Addf("%v", err)
	}
	path := c.path()
	switch {
	case strings.TrimSpace(path) != path:
		found.Addf("Config.Path %q has leading or trailing spaces; trim them", c.Path)
		path = defaultPath // so that BaseURL is still checked
	case !strings.HasPrefix(path, "/"):
		found.Addf("Config.Path %q must start with /", c.Path)
		path = defaultPath
	case strings.Contains(path, "#"):
		found.Addf("Config.Path %q has a fragment, which is never sent; remove it", c.Path)
		path = defaultPath
	}
	if _, err := wire.URL(c.BaseURL, defaultBaseURL, path); err != nil {
		found.Addf("%v", err)
	}
	if _, err := wire.MaxBytes(c.MaxResponseBytes); err != nil {
		found.Addf("%v", err)
	}
	if strings.TrimSpace(c.Name) != c.Name {
		found.Addf("Config.Name %q has leading or trailing spaces; trim them", c.Name)
	}
	if c.KeyHeader != "" && !wire.HeaderName(c.KeyHeader) {
		found.Addf("Config.KeyHeader %q is not a header name; use letters, digits and -, such as \"api-key\"", c.KeyHeader)
	}
	for _, err := range wire.Header(c.Header) {
		found.Addf("%v", err)
	}
	return found.Err()
}

// path is c.Path, or defaultPath when it is empty.
func (c Config) path() string {
	if c.Path == "" {
		return defaultPath
	}
	return c.Path
}

// New returns a Provider configured by cfg. New checks cfg with Validate;
// an error matches llm.ErrInvalidConfig and says which field to change.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	url, _ := wire.URL(cfg.BaseURL, defaultBaseURL, cfg.path())
	maxBytes, _ := wire.MaxBytes(cfg.MaxResponseBytes)
	name := cfg.Name
	if name == "" {
		name = defaultName
	}
	h := http.Header{
		"Content-Type": {"application/json"},
		"Accept":       {"application/json"},
	}
	switch kh := http.CanonicalHeaderKey(cfg.KeyHeader); kh {
	case "", "Authorization":
		h.Set("Authorization", "Bearer "+cfg.APIKey)
	default:
		h.Set(kh, cfg.APIKey)
	}
	for k, v := range cfg.Header {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
	}
	return &Provider{legacy: cfg.LegacyMaxTokens, ep: wire.Endpoint{
		Provider:  name,
		URL:       url,
		Client:    wire.Client(cfg.HTTPClient),
		Header:    h,
		MaxBytes:  maxBytes,
		Secret:    cfg.APIKey,
		RequestID: "X-Request-Id",
		RateLimit: rateLimit,
	}}, nil
}

// Name returns Config.Name, "openai" by default.
func (p *Provider) Name() string { return p.ep.Provider }

// Complete sends req to the Chat Completions endpoint as exactly one HTTP
// request and returns the first choice, with the usage and the rate limit
// announced in the headers.
//
// The body carries model; messages, led by req.System as a "system"
// message when not empty; max_completion_tokens (or max_tokens, see
// Config.LegacyMaxTokens), temperature, top_p and stop when set; tools
// (function tools; a tool without an InputSchema takes
// {"type":"object","properties":{}}) and, with them, tool_choice when not
// auto
// ("none", "required" for llm.ToolAny, {"type":"function","function":
// {"name":…}} for llm.ToolNamed); response_format {"type":"json_schema",
// "json_schema":{"name":"response","schema":…,"strict":true}} when
// req.ResponseSchema is set; then Params.Extra merged at the top level,
// replacing any of those.
//
// A message with only Content goes out as {"role":…,"content":"<text>"},
// as before parts existed. A user message with parts goes out as one
// {"role":"tool","tool_call_id":…,"content":…} message per tool result,
// then, if anything else remains, a user message whose content is an
// array: Content as a text part first, then text parts, images as
// image_url parts (a data: URL for inline bytes), PDFs as file parts
// ({"file_data":"data:application/pdf;base64,…","filename":…}), text
// documents as text parts. An assistant message with parts carries its
// text as the content string (omitted when empty and there are tool calls)
// and its tool calls as tool_calls, each call's arguments as a JSON string
// ("{}" when empty).
//
// The answer's tool calls are in Response.ToolCalls, in order, their ids
// as the caller knows them; Response.Finish normalizes finish_reason.
//
// Every failure is an *llm.Error whose Kind classifies it: the API's error
// code, a content filter or refusal (KindContentFilter, the model's
// refusal text in Detail only), an unreadable body, a part Chat
// Completions cannot carry (KindBadRequest, nothing sent), or the
// transport error (KindCanceled when ctx was canceled).
func (p *Provider) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	ids := openaiwire.ToolIDs()
	r, err := p.newRequest(req, &ids)
	if err != nil {
		return nil, err
	}
	body, err := p.ep.Encode(r, req.Params.Extra)
	if err != nil {
		return nil, err
	}
	reply, err := p.ep.Post(ctx, body)
	if err != nil {
		return nil, err
	}
	calls := wire.NewCallIDs(req.Messages, &ids)
	return p.parse(reply, &calls)
}

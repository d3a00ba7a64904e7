// Package anthropic is the backstop adapter for Anthropic's Messages API. It
// owns the Anthropic wire format: the request body, the response and error
// bodies, the streamed events, the request-id and anthropic-ratelimit-*
// headers, and the mapping of Anthropic's error types onto llm.Kind. It
// carries whole conversations: text, images, documents, tools, tool calls
// and their results, and native structured output (output_config). A
// Provider makes exactly one HTTP request per Complete or Stream; retries,
// waits and fallbacks belong to the chain.
//
// Every field of Config but APIKey defaults when zero; New checks it once
// with Config.Validate, and every error it returns matches the module's
// invalid-configuration sentinel (errors.Is(err, llm.ErrInvalidConfig))
// and names what to change.
package anthropic

import (
	"context"
	"net/http"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

const (
	// defaultBaseURL is the Anthropic API used when Config.BaseURL is empty.
	defaultBaseURL = "https://api.anthropic.com"
	// apiVersion is the anthropic-version header sent with every request.
	apiVersion = "2023-06-01"
	// defaultMaxTokens is the max_tokens sent when llm.Params.MaxTokens is
	// 0: the Messages API requires a value.
	defaultMaxTokens = 1024
)

// Config configures a Provider. Every field's zero value is its documented
// default except APIKey's, which is required: Config{APIKey: key} sends to
// the Anthropic API. New checks it with Validate.
type Config struct {
	// APIKey is sent as the x-api-key header. Required. It never appears in
	// an error or an answer's metadata: the adapter redacts it from
	// everything it quotes. A key of 16 bytes or more (every key Anthropic
	// issues) is redacted wherever it appears; a shorter one (a placeholder
	// for a gateway or a local server) cannot be told apart from ordinary
	// text, so it is redacted only where it stands as a whole token, not
	// touching a letter, a digit, '_' or '-' ("key=k;", a header holding
	// just the key): a request id such as "req_fake_19" stays intact with
	// the key "k". A key with a control character (a file's trailing
	// newline) or leading or trailing spaces is an error.
	APIKey string

	// BaseURL is the scheme, host and optional path prefix of the API, to
	// which "/v1/messages" is appended (a trailing slash is ignored). It must
	// be an absolute http or https URL with a host, and carry no query,
	// fragment, or leading or trailing spaces. Empty means https://api.anthropic.com.
	BaseURL string

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

	// Header holds extra headers sent with every request (anthropic-beta,
	// say). A header named here replaces the adapter's own of that name
	// (x-api-key, anthropic-version, content-type). Nil sends none. A
	// name that is not a header name ("X Team", "X-Team:"), a value with a
	// control character other than tab, or two spellings of one name
	// ("x-team" and "X-Team") is an error: net/http would refuse the
	// first two on every request.
	Header http.Header

	// MaxResponseBytes caps the response body read, success or error; a
	// longer body fails the attempt with an *llm.Error instead of being
	// read. A stream, whose length has no bound, is capped per line, per
	// event, in its assembled text and in its assembled tool calls
	// instead. Zero means 8 MiB; negative is an error.
	MaxResponseBytes int64
}

// Provider sends requests to the Anthropic Messages API. It implements
// llm.Provider and llm.StreamProvider and is safe for concurrent use.
// Create one with New.
type Provider struct {
	ep wire.Endpoint
}

var (
	_ llm.Provider        = (*Provider)(nil)
	_ llm.CapableProvider = (*Provider)(nil)
	_ llm.MediaProvider   = (*Provider)(nil)
	_ llm.SchemaChecker   = (*Provider)(nil)
)

// errHead heads every configuration error of the package; it matches the
// module's invalid-configuration sentinel (llm.ErrInvalidConfig).
var errHead = problems.Head("anthropic: invalid configuration")

// Validate reports every problem of c at once, each naming the field and
// what to change; nil when New would take c. Errors match the module's
// invalid-configuration sentinel (errors.Is(err, llm.ErrInvalidConfig)).
// New calls it; call it yourself to check a configuration read from a
// file before building a provider.
func (c Config) Validate() error {
	found := problems.New(errHead)
	if err := wire.Key(c.APIKey); err != nil {
		found.Addf("%v", err)
	}
	if _, err := wire.URL(c.BaseURL, defaultBaseURL, messagesPath); err != nil {
		found.Addf("%v", err)
	}
	if _, err := wire.MaxBytes(c.MaxResponseBytes); err != nil {
		found.Addf("%v", err)
	}
	for _, err := range wire.Header(c.Header) {
		found.Addf("%v", err)
	}
	return found.Err()
}

// messagesPath is the Messages API's path under Config.BaseURL.
const messagesPath = "/v1/messages"

// New returns a Provider configured by cfg. New checks cfg with Validate;
// an error matches llm.ErrInvalidConfig and says which field to change.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	url, _ := wire.URL(cfg.BaseURL, defaultBaseURL, messagesPath)
	maxBytes, _ := wire.MaxBytes(cfg.MaxResponseBytes)
	h := http.Header{
		"X-Api-Key":         {cfg.APIKey},
		"Anthropic-Version": {apiVersion},
		"Content-Type":      {"application/json"},
		"Accept":            {"application/json"},
	}
	for k, v := range cfg.Header {
		h[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
	}
	return &Provider{ep: wire.Endpoint{
		Provider:  "anthropic",
		URL:       url,
		Client:    wire.Client(cfg.HTTPClient),
		Header:    h,
		MaxBytes:  maxBytes,
		Secret:    cfg.APIKey,
		RequestID: "Request-Id",
		RateLimit: rateLimit,
	}}, nil
}

// Name returns "anthropic", the OpenTelemetry GenAI provider name.
func (p *Provider) Name() string { return p.ep.Provider }

// Complete sends req to the Messages API as exactly one HTTP request and
// returns the answer: the text blocks concatenated; the tool_use blocks as
// ToolCalls, in order, their input as Arguments (the blocks of Anthropic's
// server tools, which the API runs itself, are skipped); the stop reason,
// as sent and normalized (Finish); the usage with cached input counted as
// input; and the rate limit announced in the headers.
//
// The body carries model; max_tokens (1024 when
// Params.MaxTokens is 0); system when not empty; messages; temperature,
// top_p and stop_sequences when set; tools, tool_choice and output_config
// when the request has tools, a tool choice or a ResponseSchema; then
// Params.Extra merged at the top level, replacing any of those.
//
// A message with only Content is sent as {"role", "content": "<text>"}; a
// message with Parts as a content array: Content as a text block, then
// each part as a text, image (base64 or url), document (base64 PDF, url,
// or a plain-text source for text/*), tool_use or tool_result block. A
// tool-call id the API would refuse (it takes 1 to 64 letters, digits, _
// and -) is sent as "toolu_" and a hash of it, the same for the call and
// its result, and an answer echoing it gets the caller's id back. An
// answer's call whose id the conversation already holds (another
// provider's, or an earlier call of the answer) is given a fresh one,
// <id>_2 (see wire.CallIDs), so that its result can be sent.
//
// Every failure is an *llm.Error whose Kind classifies it: the API's error
// type, a refusal (KindContentFilter), an unreadable body, the transport
// error (KindCanceled when ctx was canceled), or, before anything is sent,
// a document of a type the API does not take (KindBadRequest).
func (p *Provider) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	ids := newToolIDs()
	wr, err := p.newRequest(req, &ids)
	if err != nil {
		return nil, err
	}
	body, err := p.ep.Encode(wr, req.Params.Extra)
	if err != nil {
		return nil, err
	}
	r, err := p.ep.Post(ctx, body)
	if err != nil {
		return nil, err
	}
	calls := wire.NewCallIDs(req.Messages, &ids)
	return p.parse(r, &calls)
}

// Capabilities returns llm.CapAll: the Messages API takes tools, images
// and PDFs inline or by URL, plain-text documents, and native structured
// output (see CheckResponseSchema for the schemas it takes).
func (p *Provider) Capabilities() llm.Capabilities { return llm.CapAll }

// MediaTypes returns the media types the Messages API takes: images as
// JPEG, PNG, GIF or WebP; documents as PDF, or as text (any text/… type
// goes as a plain-text source). A chain passes the target over for any
// other (a ZIP archive, a Word file), which the adapter refuses as a bad
// request when sent one directly.
func (p *Provider) MediaTypes() llm.MediaTypes {
	return llm.MediaTypes{
		Images:    []string{"image/jpeg", "image/png", "image/gif", "image/webp"},
		Documents: []string{"application/pdf", "text/*"},
	}
}

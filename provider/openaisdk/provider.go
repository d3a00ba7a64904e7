package openaisdk

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// The APIs a Provider can call (Config.API).
const (
	// APIChat is the Chat Completions API (POST chat/completions): the
	// default, and the one compatible servers speak.
	APIChat = "chat"
	// APIResponses is the Responses API (POST responses).
	APIResponses = "responses"
)

// The platforms Name knows (Config.Platform); any other value names a
// compatible server.
const (
	PlatformOpenAI = "openai"
	PlatformAzure  = "azure"
)

// Config configures a Provider. Every field's zero value is its
// documented default: the zero Config calls Chat Completions on OpenAI.
// New checks it with Validate.
type Config struct {
	// API is APIChat ("chat", the default when empty) or APIResponses
	// ("responses").
	API string
	// Platform is where the client points: "openai" (the default when
	// empty), "azure", or a compatible server's name ("vllm", "ollama",
	// "groq", …). It names the provider (see Name) and is Deployment's
	// Platform. "Azure" or "OpenAI" (a known platform in other case) is an
	// error, so that a typo does not name a compatible server.
	Platform string
	// Region is the cloud region requests go to (an Azure resource's
	// region, "westeurope"), for Deployment; empty when the platform does
	// not say.
	Region string
	// Name overrides what Name returns.
	Name string
	// APIKey, when set, is redacted from every error and from the text
	// fields of every answer the Provider returns (it is not sent: the
	// client carries its own credentials). The credentials each request
	// carries (the key, an Azure api-key, an Azure identity's token) are
	// learned from it and redacted whether or not APIKey is set; setting
	// it to the key the client was built with also covers what fails
	// before a request leaves. A key shorter than 16 bytes is redacted
	// only where it stands as a whole token. A key with a control
	// character (a file's trailing newline) is an error.
	APIKey string
	// MaxResponseBytes caps the body of every response, success or error,
	// compressed or not (the cap is on what it inflates to), each event of
	// a stream, and the text and the tool calls a Stream assembles; past
	// it the attempt fails with an *llm.Error (KindServer for a 2xx),
	// having read at most the cap. Zero means 8 MiB; negative is an error.
	MaxResponseBytes int64
}

// Provider is a backstop provider over an openai-go client. It implements
// llm.Provider, llm.StreamProvider, llm.CapableProvider, llm.SchemaChecker
// and llm.DeployedProvider, and is safe for concurrent use (as the client
// is). Create one with New.
type Provider struct {
	client    openai.Client
	responses bool
	dep       llm.Deployment
	// ep holds the name, the key, the cap, the request-id header and the
	// rate-limit reader of every attempt's Exchange; it never sends
	// anything itself.
	ep wire.Endpoint
}

var (
	_ llm.StreamProvider   = (*Provider)(nil)
	_ llm.CapableProvider  = (*Provider)(nil)
	_ llm.SchemaChecker    = (*Provider)(nil)
	_ llm.DeployedProvider = (*Provider)(nil)
)

// errHead heads every configuration error of the package; it matches the
// module's invalid-configuration sentinel (llm.ErrInvalidConfig).
var errHead = problems.Head("openaisdk: invalid configuration")

// Validate reports every problem of c at once, each naming the field and
// what to change; nil when New would take c. Errors match the module's
// invalid-configuration sentinel (errors.Is(err, llm.ErrInvalidConfig)).
// New calls it.
func (c Config) Validate() error {
	found := problems.New(errHead)
	switch c.API {
	case "", APIChat, APIResponses:
	default:
		found.Addf("Config.API is %q; use %q (or empty) or %q", c.API, APIChat, APIResponses)
	}
	for _, known := range []string{PlatformOpenAI, PlatformAzure} {
		if c.Platform != known && strings.EqualFold(c.Platform, known) {
			found.Addf("Config.Platform is %q; write %q: a platform Name knows is written in lower case, and any other value names a compatible server", c.Platform, known)
		}
	}
	if strings.TrimSpace(c.Platform) != c.Platform || strings.TrimSpace(c.Name) != c.Name ||
		strings.TrimSpace(c.Region) != c.Region {
		found.Addf("Config.Platform, Name or Region has leading or trailing spaces; trim them")
	}
	for _, err := range wire.SDKConfig(c.APIKey, c.MaxResponseBytes) {
		found.Addf("%v", err)
	}
	return found.Err()
}

// New returns a Provider calling through client, which the caller built
// with openai.NewClient (for OpenAI, Azure with the azure package's
// options, or any compatible base URL). The client's own retry setting is
// overridden on every call: see the package documentation. New checks cfg
// with Validate; an error matches llm.ErrInvalidConfig and says which
// field to change.
func New(client openai.Client, cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	platform := cfg.Platform
	if platform == "" {
		platform = PlatformOpenAI
	}
	name := cfg.Name
	if name == "" {
		switch platform {
		case PlatformOpenAI:
			name = "openai"
		case PlatformAzure:
			name = "azure.ai.openai"
		default:
			name = platform
		}
	}
	max, _ := wire.MaxBytes(cfg.MaxResponseBytes)
	return &Provider{client: client, responses: cfg.API == APIResponses,
		dep: llm.Deployment{Platform: platform, Region: cfg.Region},
		ep:  wire.Endpoint{Provider: name, Secret: cfg.APIKey, MaxBytes: max, RequestID: "X-Request-Id", RateLimit: classify.VendorOpenAI.RateLimit},
	}, nil
}

// Name returns Config.Name, else "openai" on OpenAI, "azure.ai.openai" on
// Azure, and the platform's name on a compatible server.
func (p *Provider) Name() string { return p.ep.Provider }

// Deployment returns Config.Platform ("openai" by default) and
// Config.Region.
func (p *Provider) Deployment() llm.Deployment { return p.dep }

// Capabilities returns what the API carries: tools, images inline and by
// URL, inline documents and native schemas. Chat Completions takes no
// document by URL (a file part has file_data and file_id only); the
// Responses API does (an input_file's file_url), so with APIResponses
// Capabilities is llm.CapAll.
func (p *Provider) Capabilities() llm.Capabilities {
	if p.responses {
		return llm.CapAll
	}
	return llm.CapAll &^ llm.CapDocumentURLs
}

var _ llm.MediaProvider = (*Provider)(nil)

// MediaTypes returns the document types Chat Completions takes: PDF (the
// only file type its file_data and file_id take) and text (a text/…
// document goes as text). The Responses API's input_file takes many
// document types (Word, spreadsheets, code, …), so with APIResponses the
// API decides. Images are not limited: OpenAI takes PNG, JPEG, WebP and
// GIF, but a compatible server may take more, so the server decides.
func (p *Provider) MediaTypes() llm.MediaTypes {
	if p.responses {
		return llm.MediaTypes{}
	}
	return llm.MediaTypes{Documents: []string{"application/pdf", "text/*"}}
}

// Complete sends req as exactly one HTTP request, to Chat Completions or
// to the Responses API (Config.API), and returns the answer. The request
// and the answer are translated as the native adapter
// (provider/openai) translates them; see the package documentation for
// the Responses API's equivalents. Every failure is an *llm.Error.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (res *llm.Response, err error) {
	a := p.newAttempt(false)
	defer a.recoverInto(&err, func() { res = nil })
	ids := openaiwire.ToolIDs()
	if p.responses {
		return a.completeResponses(ctx, req, &ids)
	}
	return a.completeChat(ctx, req, &ids)
}

// Stream sends req as exactly one streaming HTTP request and returns once
// the response headers have arrived; a failure before that is returned as
// Complete returns it. See the package documentation for the chunks.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (st llm.Stream, err error) {
	a := p.newAttempt(true)
	defer a.recoverInto(&err, func() { st = nil })
	ids := openaiwire.ToolIDs()
	if p.responses {
		return a.streamResponses(ctx, req, &ids)
	}
	return a.streamChat(ctx, req, &ids)
}

// attempt is one call of Complete or Stream: the Provider, and the
// Exchange its one request goes through (see guard), which learns the
// credentials the request carries; every error and every answer of the
// call passes its Redact or Clean.
type attempt struct {
	p *Provider
	x *wire.Exchange
}

func (p *Provider) newAttempt(stream bool) *attempt {
	return &attempt{p: p, x: p.ep.NewExchange(stream, false)}
}

// callOptions are the options of every call: no retries whatever the
// client says, Params.Extra merged into the body (a key replacing the
// SDK's, nil sending null, as the native adapter does), more, then the
// guard, last so that it is the innermost middleware the adapter installs.
func (a *attempt) callOptions(extra map[string]any, more ...option.RequestOption) ([]option.RequestOption, error) {
	opts := make([]option.RequestOption, 0, 2+len(extra)+len(more))
	opts = append(opts, option.WithMaxRetries(0))
	for k, v := range extra {
		b, err := wire.Marshal(v)
		if err != nil {
			return nil, a.x.Redact(&llm.Error{Provider: a.p.Name(), Kind: llm.KindBadRequest,
				Message: fmt.Sprintf("cannot encode the request body: Params.Extra[%q]: %v", k, err), Err: err})
		}
		opts = append(opts, option.WithJSONSet(sjsonKey(k), rawJSON(b)))
	}
	opts = append(opts, more...)
	return append(opts, option.WithMiddleware(a.guard)), nil
}

// guard is the middleware every call of both APIs goes through, below the
// client's middleware and the adapter's own (only the azure package's
// credential middleware, which the SDK installs after every option, runs
// below it, then the HTTP client): the attempt's Exchange, which
// counts the request, learns its credentials, refuses a redirect that
// comes back and reads the body under the cap before the SDK sees it;
// then what a client that follows redirects leaves behind. The SDK itself
// refuses to send a redirected request to another origin (openai-go's
// origin check, the azure package's credential transport): that refusal
// comes back as the client's *url.Error naming the other URL, and fails
// the attempt as a redirect. A redirect the client followed on the same
// origin comes back as an answer whose request has a Response, and fails
// it too.
func (a *attempt) guard(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	res, err := a.x.Middleware(r, next)
	if a.x.Failure() != nil {
		return res, err
	}
	if err != nil {
		// The redirect's URL is not quoted: the server chose it, and it
		// may echo a credential added below (an Azure identity's token)
		// that the Exchange, seeing no response, could not learn.
		if to, ok := redirectedTo(r, err); ok && wire.SameOrigin(to, r.URL) {
			a.x.Fail(a.redirected(nil, "the server redirected the request and the HTTP client followed it on the same origin until it failed; the adapter does not follow redirects: give the SDK a client that does not follow them, and the endpoint the provider documents"))
			return nil, wire.ErrRefused
		} else if ok {
			a.x.Fail(a.redirected(nil, "the server redirected the request to another origin; the SDK refused to send it there, and the adapter does not follow redirects, which would send the credentials and the request to another URL: give the SDK the endpoint the provider documents"))
			return nil, wire.ErrRefused
		}
		return res, err
	}
	if res != nil && res.Request != nil && res.Request.Response != nil {
		if res.Body != nil {
			res.Body.Close()
		}
		to := "another URL"
		if res.Request.URL != nil {
			to = strconv.Quote(res.Request.URL.Redacted())
		}
		a.x.Fail(a.redirected(res.Request.Response, fmt.Sprintf("the server answered %d %s and the HTTP client followed it to %s; the adapter takes no answer from a redirect: give the SDK a client that does not follow redirects, and the endpoint the provider documents",
			res.Request.Response.StatusCode, http.StatusText(res.Request.Response.StatusCode), to)))
		return nil, wire.ErrRefused
	}
	return res, nil
}

// redirectedTo reports whether err, what the HTTP client returned for r,
// is about another request than r: a redirect the client followed, then
// failed (the SDK refused it, or it hit the client's limit). The URL is
// the redirect's.
func redirectedTo(r *http.Request, err error) (*url.URL, bool) {
	ue, ok := err.(*url.Error)
	if !ok || r.URL == nil {
		return nil, false
	}
	to, perr := url.Parse(ue.URL)
	if perr != nil {
		return nil, false
	}
	plain := func(u *url.URL) string {
		c := *u
		c.User = nil
		return c.String()
	}
	if plain(to) == plain(r.URL) {
		return nil, false
	}
	return to, true
}

// redirected is the failure of a redirect refused or followed: KindNotFound
// (the endpoint is not where the configuration says), Code "redirect",
// with the status and headers of the redirect when it arrived.
func (a *attempt) redirected(res *http.Response, msg string) *llm.Error {
	r := a.x.Reply()
	if res != nil {
		r = &wire.Reply{Status: res.StatusCode, Header: res.Header, Received: r.Received}
	}
	f := a.p.ep.Failure(r, llm.KindNotFound)
	f.Code, f.Message = "redirect", msg
	return f
}

// send makes one call of an API: params sent by call with the options of
// every call. It returns the decoded answer and the reply that carried
// it; a failure is classified (see fail).
func send[P, R any](ctx context.Context, a *attempt, extra map[string]any, params P,
	call func(context.Context, P, ...option.RequestOption) (R, error)) (R, classify.Reply, error) {
	var res R
	opts, err := a.callOptions(extra)
	if err != nil {
		return res, classify.Reply{}, err
	}
	res, err = call(ctx, params, opts...)
	if err != nil {
		return res, classify.Reply{}, a.fail(ctx, err)
	}
	return res, a.reply(), nil
}

// openStream starts a streaming call of an API: params sent by call with
// the options of every call and more; a failure before the stream starts
// is classified (see fail). A server that does not stream may answer with
// a JSON body instead: it is decoded as a W, which whole turns into the
// answer the stream then delivers, and the SDK's stream is nil.
func openStream[P, E, W any](ctx context.Context, a *attempt, extra map[string]any, params P,
	call func(context.Context, P, ...option.RequestOption) *ssestream.Stream[E],
	whole func(*W, classify.Reply) (*llm.Response, error), more ...option.RequestOption) (*stream, *ssestream.Stream[E], error) {
	opts, err := a.callOptions(extra, more...)
	if err != nil {
		return nil, nil, err
	}
	sdk := call(ctx, params, opts...)
	if err := sdk.Err(); err != nil {
		sdk.Close()
		return nil, nil, a.fail(ctx, err)
	}
	rp := a.reply()
	s := newStream(a, ctx, rp, sdk.Close)
	if !isJSON(rp.Header) {
		return s, sdk, nil
	}
	body, err := a.wholeBody()
	sdk.Close()
	if err != nil {
		return nil, nil, err
	}
	var w W
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, nil, a.bodyError(withBody(rp, body), "the JSON answer to a streaming request could not be decoded", err)
	}
	res, err := whole(&w, rp)
	if err != nil {
		return nil, nil, err
	}
	s.whole(res)
	return s, nil, nil
}

// wholeBody returns the JSON body of a 2xx to a streaming request: as the
// Exchange read it, or (a JSON type it took for an event stream, such as
// application/problem+json) read here under the cap.
func (a *attempt) wholeBody() ([]byte, error) {
	if b := a.x.Body(); b != nil {
		return b, nil
	}
	res := a.x.Response()
	if res == nil || res.Body == nil {
		return nil, nil
	}
	b, err := wire.ReadCapped(res.Body, -1, a.p.ep.MaxBytes)
	if f := a.x.Failure(); f != nil {
		return nil, f
	}
	if err != nil {
		f := a.p.ep.Failure(a.x.Reply(), llm.KindServer)
		f.Message = "reading the response body: " + err.Error()
		if err == wire.ErrTooLarge {
			f.Message = fmt.Sprintf("response body is larger than %d bytes; raise MaxResponseBytes if answers are meant to be this large", a.p.ep.MaxBytes)
		}
		f.Err = err
		return nil, a.x.Fail(f)
	}
	return b, nil
}

// rawJSON is a value already encoded: sjson (behind option.WithJSONSet)
// marshals it as it is.
type rawJSON []byte

// MarshalJSON implements json.Marshaler.
func (r rawJSON) MarshalJSON() ([]byte, error) { return r, nil }

// sjsonKey escapes k as one top-level key of an sjson path: a '.', '*',
// '?' or any other byte that is not a letter, digit, '_' or '-' is
// backslash-escaped.
func sjsonKey(k string) string {
	var b strings.Builder
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c >= 0x80) {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// recoverInto turns a panic inside the SDK (or in a middleware, a
// RoundTripper, …) into an *llm.Error in *err, after clear has cleared the
// other results.
func (a *attempt) recoverInto(err *error, clear func()) {
	if v := recover(); v != nil {
		clear()
		*err = a.panicked(v)
	}
}

// panicked is the error for a recovered panic: KindUnknown (not retried on
// the same target; the breaker counts it; the chain moves on).
func (a *attempt) panicked(v any) *llm.Error {
	cause, ok := v.(error)
	if !ok {
		cause = fmt.Errorf("%v", v)
	}
	return a.x.Redact(&llm.Error{Provider: a.p.Name(), Kind: llm.KindUnknown,
		Message: "the OpenAI SDK panicked: " + cause.Error(), Err: cause})
}

// badPart is the failure of part j of message i, which the API cannot
// carry: a KindBadRequest *llm.Error; nothing is sent.
func (p *Provider) badPart(i, j int, role llm.Role, why string) *llm.Error {
	return &llm.Error{Provider: p.Name(), Kind: llm.KindBadRequest,
		Message: fmt.Sprintf("message %d (%s), part %d: %s", i, role, j, why)}
}

// badRequest is a request the adapter cannot send: KindBadRequest.
func (p *Provider) badRequest(msg string, cause error) *llm.Error {
	return p.ep.Redact(&llm.Error{Provider: p.Name(), Kind: llm.KindBadRequest, Message: msg, Err: cause})
}

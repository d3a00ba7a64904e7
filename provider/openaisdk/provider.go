package openaisdk

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// The APIs a Provider can call (Options.API).
const (
	// APIChat is the Chat Completions API (POST chat/completions): the
	// default, and the one compatible servers speak.
	APIChat = "chat"
	// APIResponses is the Responses API (POST responses).
	APIResponses = "responses"
)

// The platforms Name knows (Options.Platform); any other value names a
// compatible server.
const (
	PlatformOpenAI = "openai"
	PlatformAzure  = "azure"
)

// Options configures a Provider. The zero value calls Chat Completions on
// OpenAI.
type Options struct {
	// API is APIChat ("chat", the default when empty) or APIResponses
	// ("responses").
	API string
	// Platform is where the client points: "openai" (the default when
	// empty), "azure", or a compatible server's name ("vllm", "ollama",
	// "groq", …). It names the provider (see Name) and is Deployment's
	// Platform.
	Platform string
	// Region is the cloud region requests go to (an Azure resource's
	// region, "westeurope"), for Deployment; empty when the platform does
	// not say.
	Region string
	// Name overrides what Name returns.
	Name string
	// APIKey, when set, is redacted from every error and from the text
	// fields of every answer the Provider returns (it is not sent: the
	// client carries its own credentials). Give it the key the client was
	// built with; a key shorter than 16 bytes is redacted only where it
	// stands as a whole token.
	APIKey string
}

// Provider is a backstop provider over an openai-go client. It implements
// llm.Provider, llm.StreamProvider, llm.CapableProvider, llm.SchemaChecker
// and llm.DeployedProvider, and is safe for concurrent use (as the client
// is). Create one with New.
type Provider struct {
	client    openai.Client
	responses bool
	dep       llm.Deployment
	// ep holds the name and the key for the shared redaction helpers; it
	// never sends anything.
	ep wire.Endpoint
}

var (
	_ llm.StreamProvider   = (*Provider)(nil)
	_ llm.CapableProvider  = (*Provider)(nil)
	_ llm.SchemaChecker    = (*Provider)(nil)
	_ llm.DeployedProvider = (*Provider)(nil)
)

// New returns a Provider calling through client, which the caller built
// with openai.NewClient (for OpenAI, Azure with the azure package's
// options, or any compatible base URL). The client's own retry setting is
// overridden on every call: see the package documentation. An error says
// which option to change.
func New(client openai.Client, opts Options) (*Provider, error) {
	p := &Provider{client: client}
	switch opts.API {
	case "", APIChat:
	case APIResponses:
		p.responses = true
	default:
		return nil, fmt.Errorf("openaisdk: Options.API %q is neither %q nor %q", opts.API, APIChat, APIResponses)
	}
	platform := opts.Platform
	if platform == "" {
		platform = PlatformOpenAI
	}
	if strings.TrimSpace(platform) != platform || strings.TrimSpace(opts.Name) != opts.Name ||
		strings.TrimSpace(opts.Region) != opts.Region {
		return nil, errors.New("openaisdk: Options.Platform, Name or Region has leading or trailing spaces; trim them")
	}
	if opts.APIKey != "" {
		if err := wire.Key(opts.APIKey); err != nil {
			return nil, fmt.Errorf("openaisdk: Options.APIKey: %w", err)
		}
	}
	name := opts.Name
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
	p.dep = llm.Deployment{Platform: platform, Region: opts.Region}
	p.ep = wire.Endpoint{Provider: name, Secret: opts.APIKey, RequestID: "X-Request-Id", RateLimit: llm.VendorOpenAI.RateLimit}
	return p, nil
}

// Name returns Options.Name, else "openai" on OpenAI, "azure.ai.openai" on
// Azure, and the platform's name on a compatible server.
func (p *Provider) Name() string { return p.ep.Provider }

// Deployment returns Options.Platform ("openai" by default) and
// Options.Region.
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
// to the Responses API (Options.API), and returns the answer. The request
// and the answer are translated as the native adapter
// (provider/openai) translates them; see the package documentation for
// the Responses API's equivalents. Every failure is an *llm.Error.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (res *llm.Response, err error) {
	defer p.recoverInto(&err, func() { res = nil })
	ids := openaiwire.ToolIDs()
	if p.responses {
		return p.completeResponses(ctx, req, &ids)
	}
	return p.completeChat(ctx, req, &ids)
}

// Stream sends req as exactly one streaming HTTP request and returns once
// the response headers have arrived; a failure before that is returned as
// Complete returns it. See the package documentation for the chunks.
func (p *Provider) Stream(ctx context.Context, req llm.Request) (st llm.Stream, err error) {
	defer p.recoverInto(&err, func() { st = nil })
	ids := openaiwire.ToolIDs()
	if p.responses {
		return p.streamResponses(ctx, req, &ids)
	}
	return p.streamChat(ctx, req, &ids)
}

// callOptions are the options of every call: no retries whatever the
// client says, the raw response handed back, and Params.Extra merged into
// the body (a key replacing the SDK's, nil sending null, as the native
// adapter does).
func (p *Provider) callOptions(extra map[string]any, raw **http.Response) ([]option.RequestOption, error) {
	opts := make([]option.RequestOption, 0, 2+len(extra))
	opts = append(opts, option.WithMaxRetries(0), option.WithResponseInto(raw))
	for k, v := range extra {
		b, err := wire.Marshal(v)
		if err != nil {
			return nil, p.ep.Redact(&llm.Error{Provider: p.Name(), Kind: llm.KindBadRequest,
				Message: fmt.Sprintf("cannot encode the request body: Params.Extra[%q]: %v", k, err), Err: err})
		}
		opts = append(opts, option.WithJSONSet(sjsonKey(k), rawJSON(b)))
	}
	return opts, nil
}

// send makes one call of an API: params sent by call with the options of
// every call. It returns the decoded answer and the reply that carried
// it; a failure is classified (see fail).
func send[P, R any](ctx context.Context, p *Provider, extra map[string]any, params P,
	call func(context.Context, P, ...option.RequestOption) (R, error)) (R, llm.Reply, error) {
	var res R
	var raw *http.Response
	opts, err := p.callOptions(extra, &raw)
	if err != nil {
		return res, llm.Reply{}, err
	}
	res, err = call(ctx, params, opts...)
	received := time.Now()
	if err != nil {
		return res, llm.Reply{}, p.fail(ctx, err, raw, received)
	}
	return res, replyOf(raw, received), nil
}

// openStream starts a streaming call of an API: params sent by call with
// the options of every call and more; a failure before the stream starts
// is classified (see fail). A server that does not stream may answer with
// a JSON body instead: it is decoded as a W, which whole turns into the
// answer the stream then delivers, and the SDK's stream is nil.
func openStream[P, E, W any](ctx context.Context, p *Provider, extra map[string]any, params P,
	call func(context.Context, P, ...option.RequestOption) *ssestream.Stream[E],
	whole func(*W, llm.Reply) (*llm.Response, error), more ...option.RequestOption) (*stream, *ssestream.Stream[E], error) {
	var raw *http.Response
	opts, err := p.callOptions(extra, &raw)
	if err != nil {
		return nil, nil, err
	}
	sdk := call(ctx, params, append(opts, more...)...)
	received := time.Now()
	if err := sdk.Err(); err != nil {
		sdk.Close()
		return nil, nil, p.fail(ctx, err, raw, received)
	}
	s := newStream(p, ctx, replyOf(raw, received), sdk.Close)
	if !isJSON(raw) {
		return s, sdk, nil
	}
	var w W
	err = readJSON(raw, &w)
	sdk.Close()
	if err != nil {
		return nil, nil, p.classified(s.rp, err)
	}
	res, err := whole(&w, s.rp)
	if err != nil {
		return nil, nil, err
	}
	s.whole(res)
	return s, nil, nil
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
func (p *Provider) recoverInto(err *error, clear func()) {
	if v := recover(); v != nil {
		clear()
		*err = p.panicked(v)
	}
}

// panicked is the error for a recovered panic: KindUnknown (not retried on
// the same target; the breaker counts it; the chain moves on).
func (p *Provider) panicked(v any) *llm.Error {
	cause, ok := v.(error)
	if !ok {
		cause = fmt.Errorf("%v", v)
	}
	return p.ep.Redact(&llm.Error{Provider: p.Name(), Kind: llm.KindUnknown,
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

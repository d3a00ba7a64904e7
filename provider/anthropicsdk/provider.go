package anthropicsdk

import (
	"context"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/backstop-llm/backstop/internal/classify"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/anthropicwire"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// The platforms a client can reach, for Config.Platform and
// llm.Deployment.Platform.
const (
	PlatformAnthropic = "anthropic"
	PlatformBedrock   = "bedrock"
	PlatformVertex    = "vertex"
)

// longTokens is the largest max_tokens for which the SDK never refuses a
// non-streaming request (its smallest per-model limit, 8192, is below its
// ten-minute estimate of 21,333).
const longTokens = 8192

// DefaultMaxTokens is the max_tokens sent when llm.Params.MaxTokens is 0,
// as the native adapter sends it: the Messages API requires a value.
const DefaultMaxTokens = 1024

// Config says where the client sends its requests and how the provider
// names itself. Every field's zero value is its documented default, so the
// zero Config suits a client of the Anthropic API; Bedrock and Vertex need
// Platform and Region. New checks it with Validate.
type Config struct {
	// Platform is the service the client was built for: "anthropic" (the
	// default: anthropic.NewClient with an API key), "bedrock" (a client
	// built with bedrock.WithConfig or bedrock.WithLoadDefaultConfig) or
	// "vertex" (vertex.WithGoogleAuth or vertex.WithCredentials). It names
	// the provider (Name) and the deployment (Deployment), and says which
	// error vocabulary a reply that is not Anthropic's own is read with.
	Platform string
	// Region is where the platform serves the requests ("eu-west-1",
	// "europe-west4", "global"), reported by Deployment. Required for
	// Bedrock and Vertex: the SDK keeps the region it was given inside its
	// middleware and exposes no way to read it back, so give the same
	// value the client was built with. A request that shows another
	// region (Bedrock's SigV4 credential scope or bedrock-runtime host,
	// Vertex's location) is refused before it leaves, and a Bedrock model
	// ARN of another region fails a chain's Build (ModelDeployment). Empty
	// for the Anthropic API. Leading or trailing spaces are an error.
	Region string
	// Name overrides the provider's Name, which is otherwise the
	// OpenTelemetry gen_ai.provider.name of the platform: "anthropic",
	// "aws.bedrock", "gcp.vertex_ai". Leading or trailing spaces are an
	// error.
	Name string
	// APIKey, when set, is redacted from every error and answer's metadata,
	// as the native adapter redacts its key. Optional: the provider also
	// redacts every credential the request actually carries (x-api-key,
	// an Authorization bearer token, SigV4's access key id and signature,
	// X-Amz-Security-Token, and the OAuth token Vertex's transport adds),
	// which it reads from each request on its way out. A key of 16 bytes
	// or more is redacted wherever it appears, a shorter one where it
	// stands as a whole token. A key with a control character (a file's
	// trailing newline) or leading or trailing spaces is an error: it
	// would be redacted as written, not as the key the client sends.
	APIKey string
	// MaxResponseBytes caps every body (success or error, compressed or
	// not: the cap is on what it inflates to), every event of a stream
	// (each frame of Bedrock's event stream), and the text and the tool
	// calls a Stream assembles; a longer one fails the attempt with an
	// *llm.Error (KindServer for a 2xx) having read at most the cap. Zero
	// means 8 MiB; negative is an error.
	MaxResponseBytes int64
	// HTTPClient is the HTTP client the requests go through (its
	// transport, proxy, TLS settings, timeout); nil means one like the
	// SDK's default: a clone of http.DefaultTransport that waits at most
	// ten minutes for the response headers. Give your client here, not with
	// option.WithHTTPClient: New puts a copy of it under the SDK that
	// refuses every redirect (see the package documentation, Redirects);
	// Vertex's OAuth is added over it as over any client the SDK is given.
	// A client given with option.WithHTTPClient replaces that copy, and
	// with it the refusal of redirects: the provider still fails an attempt
	// that was redirected, but a client that follows a 301, 302 or 303 has
	// by then sent a GET, without the body and with the headers net/http
	// keeps (Bedrock's X-Amz-Security-Token, the API's x-api-key), to
	// wherever the server pointed.
	HTTPClient *http.Client
}

// Provider is a backstop provider over a client of the official Anthropic
// Go SDK. It implements llm.Provider, llm.StreamProvider,
// llm.CapableProvider, llm.SchemaChecker and llm.DeployedProvider, and is
// safe for concurrent use (as the SDK's client is). Create one with New.
type Provider struct {
	client anthropic.Client
	// messages is the client's Messages service over the client's options
	// with the guarded HTTP client put in (guard): the one every call
	// goes through.
	messages anthropic.MessageService
	// guarded says the guarded client went in right after the client's
	// first requestconfig.CallBoundary (false: it was put first).
	guarded  bool
	platform string
	region   string
	// ep is the redaction and error plumbing the native adapters share:
	// Provider, the Config.APIKey as Secret, the request-id header and
	// the rate-limit reader of the Anthropic API, the cap.
	ep wire.Endpoint
}

var (
	_ llm.Provider              = (*Provider)(nil)
	_ llm.StreamProvider        = (*Provider)(nil)
	_ llm.CapableProvider       = (*Provider)(nil)
	_ llm.SchemaChecker         = (*Provider)(nil)
	_ llm.DeployedProvider      = (*Provider)(nil)
	_ llm.ModelDeployedProvider = (*Provider)(nil)
)

// errHead heads every configuration error of the package; it matches the
// module's invalid-configuration sentinel (llm.ErrInvalidConfig).
var errHead = problems.Head("anthropicsdk: invalid configuration")

// Validate reports every problem of c at once, each naming the field and
// what to change; nil when New would take c. Errors match the module's
// invalid-configuration sentinel (errors.Is(err, llm.ErrInvalidConfig)).
// New calls it; call it yourself to check a configuration read from a
// file before building a client.
func (c Config) Validate() error {
	found := problems.New(errHead)
	switch c.Platform {
	case "", PlatformAnthropic, PlatformBedrock, PlatformVertex:
		if c.Region == "" && c.Platform != "" && c.Platform != PlatformAnthropic {
			found.Addf("Config.Region is empty; set it to the region the %s client was built with (the SDK does not expose it)", c.Platform)
		}
	default:
		found.Addf("Config.Platform is %q; use %q (or empty), %q or %q", c.Platform, PlatformAnthropic, PlatformBedrock, PlatformVertex)
	}
	if strings.TrimSpace(c.Region) != c.Region {
		// Every request would be refused: what it shows is compared with
		// Region as written.
		found.Addf("Config.Region %q has leading or trailing spaces; trim them", c.Region)
	}
	if strings.TrimSpace(c.Name) != c.Name {
		found.Addf("Config.Name %q has leading or trailing spaces; trim them", c.Name)
	}
	for _, err := range wire.SDKConfig(c.APIKey, c.MaxResponseBytes) {
		found.Addf("%v", err)
	}
	return found.Err()
}

// New returns a Provider sending through client, which the caller built
// with anthropic.NewClient for the platform cfg.Platform names. The
// client's own options (base URL, credentials, middleware, headers,
// timeouts) all apply, except its retries: every call made through the
// Provider passes option.WithMaxRetries(0), so that one Complete or Stream
// is exactly one HTTP request and the chain alone decides what to retry.
// The HTTP client is cfg.HTTPClient, guarded (see Config.HTTPClient),
// unless the client was given one with option.WithHTTPClient. New checks
// cfg with Validate; an error matches llm.ErrInvalidConfig and says
// which field to change.
func New(client anthropic.Client, cfg Config) (*Provider, error) {
	if len(client.Options) == 0 {
		return nil, fmt.Errorf("%w: the client has no options; build it with anthropic.NewClient", errHead)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	platform := cfg.Platform
	if platform == "" {
		platform = PlatformAnthropic
	}
	name := cfg.Name
	if name == "" {
		name = platformNames[platform]
	}
	maxBytes, _ := wire.MaxBytes(cfg.MaxResponseBytes)
	base := cfg.HTTPClient
	if base == nil {
		base = defaultHTTPClient()
	}
	options, guarded := guard(client.Options, wire.GuardedClient(base))
	return &Provider{client: client, messages: anthropic.NewMessageService(options...), guarded: guarded,
		platform: platform, region: cfg.Region, ep: wire.Endpoint{
			Provider:  name,
			MaxBytes:  maxBytes,
			Secret:    cfg.APIKey,
			RequestID: "Request-Id",
			RateLimit: classify.VendorAnthropic.RateLimit,
		}}, nil
}

// platformNames are the OpenTelemetry gen_ai.provider.name of each
// platform: Name when Config.Name is empty.
var platformNames = map[string]string{
	PlatformAnthropic: "anthropic",
	PlatformBedrock:   "aws.bedrock",
	PlatformVertex:    "gcp.vertex_ai",
}

// defaultHTTPClient returns a client like the one anthropic.NewClient
// makes when it is given none (the SDK's requestconfig.DefaultHTTPClient):
// a clone of http.DefaultTransport waiting at most ten minutes for the
// response headers, or http.DefaultTransport itself when it has been
// replaced by a wrapper.
func defaultHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		t = t.Clone()
		t.ResponseHeaderTimeout = 10 * time.Minute
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: http.DefaultTransport}
}

// callBoundary is the package path and name of the SDK's
// requestconfig.CallBoundary, the option anthropic.NewClient puts between
// its defaults and the caller's options.
const callBoundaryPkg, callBoundaryName = "github.com/anthropics/anthropic-sdk-go/v2/internal/requestconfig", "CallBoundary"

// isCallBoundary reports whether o is a requestconfig.CallBoundary (an
// internal type of the SDK, known by its name).
func isCallBoundary(o option.RequestOption) bool {
	t := reflect.TypeOf(o)
	return t != nil && t.PkgPath() == callBoundaryPkg && t.Name() == callBoundaryName
}

// guard returns the client's options with option.WithHTTPClient(hc) put
// right after the first requestconfig.CallBoundary: anthropic.NewClient
// builds a client's options as the SDK's defaults (its own HTTP client
// among them), a boundary, the caller's options, a boundary. There, hc
// replaces the SDK's default client, and whatever the caller passed comes
// after it: vertex.WithCredentials wraps it with OAuth (keeping its
// CheckRedirect), bedrock.WithConfig sends with it, and an
// option.WithHTTPClient of the caller's replaces it. ok is false when
// there is no boundary (a client not built by anthropic.NewClient, or an
// SDK that builds its options otherwise): hc is then put first.
func guard(opts []option.RequestOption, hc *http.Client) (out []option.RequestOption, ok bool) {
	out = make([]option.RequestOption, 0, len(opts)+1)
	for i, o := range opts {
		if isCallBoundary(o) {
			out = append(append(append(out, opts[:i+1]...), option.WithHTTPClient(hc)), opts[i+1:]...)
			return out, true
		}
	}
	return append(append(out, option.WithHTTPClient(hc)), opts...), false
}

// Name returns the provider's name: Config.Name, or the OpenTelemetry
// gen_ai.provider.name of the platform ("anthropic", "aws.bedrock",
// "gcp.vertex_ai").
func (p *Provider) Name() string { return p.ep.Provider }

// Deployment returns the platform and the region (Config.Region) the
// client sends to.
func (p *Provider) Deployment() llm.Deployment {
	return llm.Deployment{Platform: p.platform, Region: p.region}
}

// Capabilities returns llm.CapAll: the Messages API takes tools, images
// and PDFs inline or by URL, plain-text documents and native structured
// output, on every platform the SDK reaches.
func (p *Provider) Capabilities() llm.Capabilities { return llm.CapAll }

var _ llm.MediaProvider = (*Provider)(nil)

// MediaTypes returns the media types the Messages API takes, on every
// platform: images as JPEG, PNG, GIF or WebP; documents as PDF, or as text
// (any text/… type goes as a plain-text source). A chain passes the target
// over for any other, which the adapter refuses as a bad request when sent
// one directly.
func (p *Provider) MediaTypes() llm.MediaTypes {
	return llm.MediaTypes{
		Images:    []string{"image/jpeg", "image/png", "image/gif", "image/webp"},
		Documents: []string{"application/pdf", "text/*"},
	}
}

// CheckResponseSchema reports whether Anthropic's structured outputs take
// schema, by the native adapter's rules (anthropicwire.CheckSchema): nil
// when they do, else an error naming, by JSON pointer, what they refuse.
// A chain asks it at Build for targets with NativeSchema.
func (p *Provider) CheckResponseSchema(schema []byte) error {
	if err := anthropicwire.CheckSchema(schema); err != nil {
		return fmt.Errorf("%s: %w", p.Name(), err)
	}
	return nil
}

// Complete sends req through the client's Messages.New as exactly one HTTP
// request and returns the answer, as the native adapter (provider/anthropic)
// does: the text blocks concatenated; the tool_use blocks as ToolCalls, in
// order (an id the request translated comes back as the caller's); the
// stop reason as sent and normalized (Finish); the usage, cached input
// counted as input; the model and message id; the request id
// (request-id header) and the anthropic-ratelimit-* allowance.
//
// The body is the native adapter's: model, max_tokens (DefaultMaxTokens
// when Params.MaxTokens is 0), system, messages with every kind of part,
// tools, tool_choice, output_config for a ResponseSchema, temperature, top_p
// and stop_sequences when set, and Params.Extra's keys set last
// (option.WithJSONSet), replacing any of those. The SDK's own encoding of
// each block is used; it is the same JSON (TestBodyMatchesNative compares
// them) but for the system prompt, a text-only message's content and a
// tool result's content, which it sends as arrays of one text block where
// the native adapter sends a string: the API reads both alike.
//
// Every failure is an *llm.Error classified as the native adapter
// classifies it (classify.Classify with classify.VendorAnthropic, and for Bedrock
// and Vertex replies in their own shapes classify.VendorBedrock or
// classify.VendorGoogle), the key redacted: an API error, a refusal
// (KindContentFilter), a body that is not the expected JSON (KindServer for
// a 2xx), a transport failure (its llm.KindOf, KindConnection when nothing
// classifies it), KindCanceled or KindTimeout for ctx, or a panic of the
// SDK or of the client's middleware (KindUnknown).
func (p *Provider) Complete(ctx context.Context, req llm.Request) (res *llm.Response, err error) {
	c := p.newCall(false)
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, c.panicked(r)
		}
	}()
	params, opts, lerr := c.params(req)
	if lerr != nil {
		return nil, lerr
	}
	if params.MaxTokens > longTokens {
		if _, err := anthropic.CalculateNonStreamingTimeout(int(params.MaxTokens), params.Model, p.client.Options); err != nil {
			// The SDK would refuse to send a Complete it expects to take
			// more than 10 minutes; the native adapter sends it, bounded
			// by ctx alone. So does this one: an attempt timeout of ctx's
			// deadline, or of the hour the SDK's own estimate allows.
			d := time.Hour
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) > 0 {
				d = time.Until(dl)
			}
			opts = append(opts, option.WithRequestTimeout(d))
		}
	}
	var raw *http.Response
	opts = append(opts, option.WithResponseInto(&raw), option.WithMiddleware(c.observe), option.WithMaxRetries(0))
	msg, serr := p.messages.New(ctx, params, opts...)
	if serr != nil {
		return nil, c.failure(ctx, raw, serr)
	}
	if f := c.refusal(); f != nil {
		return nil, f
	}
	if raw == nil {
		raw = c.x.Response()
	}
	return c.answer(raw, msg)
}

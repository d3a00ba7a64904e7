package genai

import (
	"context"
	"fmt"
	"strings"

	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/wire"
)

// The names Name returns, as the OpenTelemetry GenAI conventions name the
// two services (gen_ai.provider.name).
const (
	// NameGemini is the Gemini API (generativelanguage.googleapis.com).
	NameGemini = "gcp.gemini"
	// NameVertex is Vertex AI (aiplatform.googleapis.com).
	NameVertex = "gcp.vertex_ai"
)

// Config configures a Provider beyond what the client already says. Every
// field's zero value is its documented default, and the zero Config is a
// working one. New checks it with Validate.
type Config struct {
	// Name is what Name returns, labelling errors and telemetry. Empty
	// means NameGemini or NameVertex, by the client's backend.
	Name string
	// Region is Deployment().Region, where requests are processed, when
	// the client does not say. On Vertex AI the client says: requests go
	// to its Location (projects/P/locations/L), or in express mode to the
	// global endpoint, and Region must then be empty or the same (a
	// contradiction is an error from New naming both). On the Gemini API,
	// which does not say where it processes requests, and on Vertex AI
	// behind a BaseURL without a project and location (a proxy), Region is
	// your word, unchecked; empty means unknown. Leading or trailing spaces
	// are an error.
	Region string
	// APIKey is a secret to redact from every error and answer, beside the
	// client's own ClientConfig().APIKey, which is always redacted: set it
	// when the key travels some other way (an HTTPClient whose transport
	// adds it); a key with a control character (a file's trailing newline)
	// or leading or trailing spaces is an error. Every credential a request
	// carries as it leaves is learned and redacted as well.
	APIKey string
	// MaxResponseBytes caps every response body (after decompression),
	// every streamed event and a stream's assembled answer (text and tool
	// calls); past it the attempt fails, having read at most the cap.
	// 0 means 8 MiB; negative is an error.
	MaxResponseBytes int64
}

// Provider sends requests through a genai client. It implements
// llm.Provider, llm.StreamProvider, llm.CapableProvider, llm.SchemaChecker
// and llm.DeployedProvider, and is safe for concurrent use (as the client
// is). Create one with New.
type Provider struct {
	models  *gg.Models
	name    string
	vertex  bool
	region  string
	secrets []wire.Endpoint // one per secret: Redact, Detail and Clean
	// ep is what each attempt's Exchange holds to: the cap, the client's
	// API key, the request-id header.
	ep wire.Endpoint
	// extra are the secrets beside the client's API key (Config.APIKey).
	extra []string
}

var (
	_ llm.Provider         = (*Provider)(nil)
	_ llm.StreamProvider   = (*Provider)(nil)
	_ llm.CapableProvider  = (*Provider)(nil)
	_ llm.SchemaChecker    = (*Provider)(nil)
	_ llm.DeployedProvider = (*Provider)(nil)
)

// errHead heads every configuration error of the package; it matches the
// module's invalid-configuration sentinel (llm.ErrInvalidConfig).
var errHead = problems.Head("genai: invalid configuration")

// Validate reports every problem of c that shows without the client, all
// at once, each naming the field and what to change; New also checks
// Region against the client. Errors match the module's
// invalid-configuration sentinel (errors.Is(err, llm.ErrInvalidConfig)).
// New calls it.
func (c Config) Validate() error {
	found := problems.New(errHead)
	if strings.TrimSpace(c.Name) != c.Name {
		found.Addf("Config.Name %q has leading or trailing spaces; trim them", c.Name)
	}
	if strings.TrimSpace(c.Region) != c.Region {
		found.Addf("Config.Region %q has leading or trailing spaces; trim them", c.Region)
	}
	for _, err := range wire.SDKConfig(c.APIKey, c.MaxResponseBytes) {
		found.Addf("%v", err)
	}
	return found.Err()
}

// New returns a Provider that sends every request through client: through
// a client New builds from client's configuration (ClientConfig), the same
// but for its HTTP client, a copy of the one client holds that refuses
// redirects and puts the adapter's guard under the SDK (see the package
// documentation). client and its HTTP client are not changed, and New
// neither detects credentials nor touches the network. New checks cfg with
// Validate, and Region against the client; an error matches
// llm.ErrInvalidConfig and says what to change.
func New(client *gg.Client, cfg Config) (*Provider, error) {
	if client == nil || client.Models == nil {
		return nil, fmt.Errorf("%w: the client is nil; create it with genai.NewClient", errHead)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cc := client.ClientConfig()
	p := &Provider{vertex: cc.Backend == gg.BackendVertexAI || cc.Backend == gg.BackendEnterprise}
	switch p.name = cfg.Name; {
	case p.name == "" && p.vertex:
		p.name = NameVertex
	case p.name == "":
		p.name = NameGemini
	}
	region, err := deployedRegion(cc, p.vertex, cfg.Region)
	if err != nil {
		return nil, err
	}
	p.region = region
	for _, s := range []string{cc.APIKey, cfg.APIKey} {
		if s != "" && (len(p.secrets) == 0 || p.secrets[0].Secret != s) {
			p.secrets = append(p.secrets, wire.Endpoint{Provider: p.name, Secret: s})
		}
	}
	if len(p.secrets) == 0 {
		p.secrets = []wire.Endpoint{{Provider: p.name}}
	}
	if cfg.APIKey != "" && cfg.APIKey != cc.APIKey {
		p.extra = []string{cfg.APIKey}
	}
	maxBytes, _ := wire.MaxBytes(cfg.MaxResponseBytes)
	p.ep = wire.Endpoint{Provider: p.name, MaxBytes: maxBytes, Secret: cc.APIKey, RequestID: "X-Goog-Request-Id"}
	if p.models, err = rebuild(cc, p.vertex); err != nil {
		f := p.redact(&llm.Error{Provider: p.name, Message: err.Error()})
		return nil, fmt.Errorf("%w: the client's configuration cannot be built again over the guarded HTTP client: %s", errHead, f.Message)
	}
	return p, nil
}

// Name returns Config.Name: "gcp.gemini" for the Gemini API and
// "gcp.vertex_ai" for Vertex AI by default.
func (p *Provider) Name() string { return p.name }

// Deployment returns the platform, "gemini" or "vertex", and the region:
// on Vertex AI the client's Location ("global" in express mode on the
// default endpoint), else Config.Region (see Config.Region).
func (p *Provider) Deployment() llm.Deployment {
	if p.vertex {
		return llm.Deployment{Platform: "vertex", Region: p.region}
	}
	return llm.Deployment{Platform: "gemini", Region: p.region}
}

// Capabilities returns what requests can carry: tools, inline images and
// documents and native structured output everywhere; images and documents
// by URL only on Vertex AI, which fetches gs:// and https:// URIs given as
// fileData. The Gemini API takes as fileData only the URIs of its own Files
// API (and YouTube links), not arbitrary URLs, so a chain does not send it
// a request that carries one. (Sent directly, a URL goes out as fileData
// all the same, and the API decides.)
func (p *Provider) Capabilities() llm.Capabilities {
	c := llm.CapTools | llm.CapImages | llm.CapDocuments | llm.CapNativeSchema
	if p.vertex {
		c |= llm.CapImageURLs | llm.CapDocumentURLs
	}
	return c
}

var _ llm.MediaProvider = (*Provider)(nil)

// MediaTypes returns the zero llm.MediaTypes: no media type is ruled out.
// Gemini takes a wide and growing range as inlineData or fileData
// (images, PDFs, text, audio, video), and the adapter sends each as it
// is, for the API to decide.
func (p *Provider) MediaTypes() llm.MediaTypes { return llm.MediaTypes{} }

// CheckResponseSchema accepts any JSON object: the schema goes out as
// responseJsonSchema, which takes JSON Schema as written (the API reports
// the keywords it does not support when the request is sent).
func (p *Provider) CheckResponseSchema(schema []byte) error {
	if _, err := decodeObject(schema); err != nil {
		return fmt.Errorf("genai: the response schema is not a JSON object: %w", err)
	}
	return nil
}

// Complete sends req as exactly one generateContent request and returns the
// first candidate. The SDK's own retries (HTTPOptions.RetryOptions, on the
// client or not) are forced off for the call, and so is its automatic
// continuation (which would send the request again with a continuation
// token): one Complete is one HTTP request.
//
// See the package documentation for how the request and the answer are
// translated. Every failure is an *llm.Error: the API's error classified
// by its google.rpc.Status (classify.VendorGoogle, RetryInfo's retryDelay as
// RetryAfter), a blocked prompt or candidate (KindContentFilter), a request
// the adapter cannot translate (KindBadRequest, nothing sent), a transport
// failure (by llm.KindOf; KindCanceled when ctx was canceled), or a panic
// inside the SDK (KindUnknown), recovered.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (res *llm.Response, err error) {
	var at *attempt
	defer func() {
		if v := recover(); v != nil {
			res, err = nil, p.panicked(at, v)
		}
	}()
	call, err := p.translate(req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, p.notSent(err)
	}
	actx, at := p.newAttempt(ctx, false)
	r, err := p.models.GenerateContent(actx, req.Model, call.contents, call.config)
	if err != nil {
		return nil, p.sdkError(ctx, at, err)
	}
	if f := p.refused(at); f != nil {
		return nil, f
	}
	var a answer
	a.ids = call.ids
	a.requestID = at.x.RequestID(altRequestID)
	a.add(r)
	if f := a.blocked(p, at); f != nil {
		return nil, f
	}
	if a.candidates == 0 {
		f := p.ep.Failure(at.x.Reply(), llm.KindServer)
		f.Message = "the answer has no candidate and no prompt feedback"
		return nil, p.finish(at, f)
	}
	return at.x.Clean(a.response()), nil
}

// notSent is the error of an attempt whose context ended before anything
// was sent.
func (p *Provider) notSent(err error) *llm.Error {
	return p.redact(&llm.Error{Provider: p.name, Kind: llm.KindOf(err), Err: err,
		Message: "the context ended before the request was sent"})
}

// panicked is the error of a panic inside the SDK (or what it calls),
// recovered; at is the attempt, nil before one started.
func (p *Provider) panicked(at *attempt, v any) *llm.Error {
	f := &llm.Error{Provider: p.name, Kind: llm.KindUnknown, Message: "the genai SDK panicked (recovered)"}
	if at == nil {
		f.Detail = p.detail(fmt.Sprint(v))
		return p.redact(f)
	}
	f.Detail = at.x.Detail(fmt.Sprint(v))
	return at.x.Redact(f)
}

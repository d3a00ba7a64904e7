package genai

import (
	"context"
	"errors"
	"fmt"
	"strings"

	gg "google.golang.org/genai"

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

// Options configures a Provider beyond what the client already says. The
// zero value is a working default.
type Options struct {
	// Name is what Name returns, labelling errors and telemetry. Empty
	// means NameGemini or NameVertex, by the client's backend.
	Name string
	// Region is Deployment().Region: where requests are processed. Empty
	// means the client's Location on Vertex AI ("global" for Vertex AI in
	// express mode, an API key without a location), and "" on the Gemini
	// API, which does not say.
	Region string
	// APIKey is a secret to redact from every error and answer, beside the
	// client's own ClientConfig().APIKey, which is always redacted: set it
	// when the key travels some other way (an HTTPClient whose transport
	// adds it).
	APIKey string
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
}

var (
	_ llm.Provider         = (*Provider)(nil)
	_ llm.StreamProvider   = (*Provider)(nil)
	_ llm.CapableProvider  = (*Provider)(nil)
	_ llm.SchemaChecker    = (*Provider)(nil)
	_ llm.DeployedProvider = (*Provider)(nil)
)

// New returns a Provider that sends every request through client, which
// New does not change. An error says what to change.
func New(client *gg.Client, opts Options) (*Provider, error) {
	if client == nil || client.Models == nil {
		return nil, errors.New("genai: the client is nil; create it with genai.NewClient")
	}
	cc := client.ClientConfig()
	p := &Provider{models: client.Models, vertex: cc.Backend == gg.BackendVertexAI || cc.Backend == gg.BackendEnterprise}
	p.name = opts.Name
	switch {
	case p.name == "" && p.vertex:
		p.name = NameVertex
	case p.name == "":
		p.name = NameGemini
	case strings.TrimSpace(p.name) != p.name:
		return nil, fmt.Errorf("genai: Options.Name %q has leading or trailing spaces; trim them", opts.Name)
	}
	p.region = opts.Region
	if p.region == "" && p.vertex {
		p.region = cc.Location
		if p.region == "" && cc.APIKey != "" {
			p.region = "global" // express mode: aiplatform.googleapis.com
		}
	}
	for _, s := range []string{cc.APIKey, opts.APIKey} {
		if s != "" && (len(p.secrets) == 0 || p.secrets[0].Secret != s) {
			p.secrets = append(p.secrets, wire.Endpoint{Provider: p.name, Secret: s})
		}
	}
	if len(p.secrets) == 0 {
		p.secrets = []wire.Endpoint{{Provider: p.name}}
	}
	return p, nil
}

// Name returns Options.Name: "gcp.gemini" for the Gemini API and
// "gcp.vertex_ai" for Vertex AI by default.
func (p *Provider) Name() string { return p.name }

// Deployment returns the platform, "gemini" or "vertex", and the region
// (Options.Region, or the client's Location on Vertex AI).
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
// by its google.rpc.Status (llm.VendorGoogle, RetryInfo's retryDelay as
// RetryAfter), a blocked prompt or candidate (KindContentFilter), a request
// the adapter cannot translate (KindBadRequest, nothing sent), a transport
// failure (by llm.KindOf; KindCanceled when ctx was canceled), or a panic
// inside the SDK (KindUnknown), recovered.
func (p *Provider) Complete(ctx context.Context, req llm.Request) (res *llm.Response, err error) {
	defer p.recoverInto(&err, &res)
	call, err := p.translate(req)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, p.sdkError(ctx, err)
	}
	r, err := p.models.GenerateContent(ctx, req.Model, call.contents, call.config)
	if err != nil {
		return nil, p.sdkError(ctx, err)
	}
	var a answer
	a.ids = call.ids
	a.add(r)
	if f := a.blocked(p); f != nil {
		return nil, f
	}
	if a.candidates == 0 {
		return nil, p.redact(&llm.Error{Provider: p.name, Kind: llm.KindServer,
			Message: "the answer has no candidate and no prompt feedback"})
	}
	return p.clean(a.response()), nil
}

// recoverInto turns a panic (inside the SDK, or in what it calls) into an
// *llm.Error in *err, so that it never escapes an attempt.
func (p *Provider) recoverInto(err *error, res **llm.Response) {
	if v := recover(); v != nil {
		*res = nil
		*err = p.panicked(v)
	}
}

func (p *Provider) panicked(v any) *llm.Error {
	return p.redact(&llm.Error{Provider: p.name, Kind: llm.KindUnknown,
		Message: "the genai SDK panicked (recovered)", Detail: p.detail(fmt.Sprint(v))})
}

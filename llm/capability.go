package llm

import "strings"

// Capabilities is a set of what a request can carry beyond text. A
// provider that declares its own (CapableProvider) is skipped by a chain
// for a request that needs what it lacks, instead of being sent a request
// that must fail.
type Capabilities uint8

// The capabilities.
const (
	// CapTools: tools, tool calls and tool results.
	CapTools Capabilities = 1 << iota
	// CapImages: images, inline.
	CapImages
	// CapImageURLs: images by URL.
	CapImageURLs
	// CapDocuments: documents (PDF, plain text), inline.
	CapDocuments
	// CapDocumentURLs: documents by URL.
	CapDocumentURLs
	// CapNativeSchema: native structured output (Request.ResponseSchema).
	CapNativeSchema

	// CapAll is every capability: what a chain assumes of a provider that
	// declares none.
	CapAll = CapTools | CapImages | CapImageURLs | CapDocuments | CapDocumentURLs | CapNativeSchema
)

// capNames are the names of the capabilities, bit by bit.
var capNames = [...]string{"tools", "images", "image URLs", "documents", "document URLs", "native schema"}

// String lists the capabilities: "tools, images"; "none" for the empty set.
func (c Capabilities) String() string {
	if c == 0 {
		return "none"
	}
	var names []string
	for i, n := range capNames {
		if c&(1<<i) != 0 {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// CapableProvider is a Provider that says what it can carry.
type CapableProvider interface {
	Provider
	Capabilities() Capabilities
}

// CapabilitiesOf returns what p declares it can carry; CapAll when it
// declares nothing.
func CapabilitiesOf(p Provider) Capabilities {
	if c, ok := p.(CapableProvider); ok {
		return c.Capabilities()
	}
	return CapAll
}

// Needs returns what req carries beyond text: the capabilities a provider
// must have to take it.
func (r *Request) Needs() Capabilities {
	var c Capabilities
	if len(r.Tools) > 0 {
		c |= CapTools
	}
	if len(r.ResponseSchema) > 0 {
		c |= CapNativeSchema
	}
	for i := range r.Messages {
		for _, p := range r.Messages[i].Parts {
			switch {
			case p.ToolCall != nil, p.ToolResult != nil:
				c |= CapTools
			case p.Media == nil:
			case p.Media.IsDocument() && p.Media.URL != "":
				c |= CapDocumentURLs
			case p.Media.IsDocument():
				c |= CapDocuments
			case p.Media.URL != "":
				c |= CapImageURLs
			default:
				c |= CapImages
			}
		}
	}
	return c
}

// SchemaChecker is a Provider that restricts the response schemas it can
// enforce natively. CheckResponseSchema returns nil when schema can be
// sent as Request.ResponseSchema, or an error that says what the provider
// would refuse and what to change. A chain asks it at Build for every
// target with NativeSchema.
type SchemaChecker interface {
	Provider
	CheckResponseSchema(schema []byte) error
}

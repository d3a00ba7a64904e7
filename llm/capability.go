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

// MediaTypes says which media types a provider takes, images and documents
// apart, beyond the capability to carry them at all (CapImages,
// CapDocuments, …). Each entry is a media type ("application/pdf") or a
// type with any subtype ("text/*"); case and parameters ("; charset=…")
// are ignored. An empty list places no limit: every media type of that
// kind is sent, for the API to accept or refuse.
//
// The zero MediaTypes takes every media type: it is what a chain assumes
// of a provider that does not declare its own (MediaProvider), which is
// sent whatever the request holds, as it always was.
type MediaTypes struct {
	// Images lists the image media types taken (image/png, image/jpeg, …).
	Images []string
	// Documents lists the document media types taken (application/pdf,
	// text/*, …).
	Documents []string
}

// MediaProvider is a Provider that says which media types it takes. A
// chain passes over a target whose provider does not take a media type
// the request carries, as it does one that lacks a capability, and
// refuses the call as a bad request when no target takes it.
type MediaProvider interface {
	Provider
	MediaTypes() MediaTypes
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

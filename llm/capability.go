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

// IsZero reports whether t places no limit on media types.
func (t MediaTypes) IsZero() bool { return len(t.Images) == 0 && len(t.Documents) == 0 }

// Takes reports whether a provider that declares t takes md: its
// MediaType matches an entry of the list for its kind (Images, or
// Documents when md.IsDocument), or that list is empty. Media without a
// MediaType (an image by URL) is taken: its type is not known before it is
// fetched.
func (t MediaTypes) Takes(md *Media) bool {
	list := t.Images
	if md.IsDocument() {
		list = t.Documents
	}
	if len(list) == 0 || md.MediaType == "" {
		return true
	}
	mt := essence(md.MediaType)
	for _, pattern := range list {
		if matchType(pattern, mt) {
			return true
		}
	}
	return false
}

// Refused returns the first media of req that a provider declaring t does
// not take (see Takes); nil when it takes them all.
func (t MediaTypes) Refused(req *Request) *Media {
	if t.IsZero() {
		return nil
	}
	for i := range req.Messages {
		parts := req.Messages[i].Parts
		for j := range parts {
			if md := parts[j].Media; md != nil && !t.Takes(md) {
				return md
			}
		}
	}
	return nil
}

// essence returns media type mt without its parameters or surrounding
// space ("text/plain; charset=utf-8" -> "text/plain").
func essence(mt string) string {
	if k := strings.IndexByte(mt, ';'); k >= 0 {
		mt = mt[:k]
	}
	return strings.TrimSpace(mt)
}

// matchType reports whether media type mt (its essence) matches pattern,
// a media type or "type/*", ignoring case.
func matchType(pattern, mt string) bool {
	pattern = essence(pattern)
	if base, ok := strings.CutSuffix(pattern, "/*"); ok {
		return len(mt) > len(base)+1 && mt[len(base)] == '/' && strings.EqualFold(mt[:len(base)], base)
	}
	return strings.EqualFold(pattern, mt)
}

// MediaProvider is a Provider that says which media types it takes. A
// chain passes over a target whose provider does not take a media type
// the request carries, as it does one that lacks a capability, and
// refuses the call as a bad request when no target takes it.
type MediaProvider interface {
	Provider
	MediaTypes() MediaTypes
}

// MediaTypesOf returns the media types p declares it takes; the zero
// MediaTypes, which takes every media type, when it declares none.
func MediaTypesOf(p Provider) MediaTypes {
	if m, ok := p.(MediaProvider); ok {
		return m.MediaTypes()
	}
	return MediaTypes{}
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

package capability

import (
	"strings"

	"github.com/backstop-llm/backstop/llm"
)

// Of returns what p declares it can carry (llm.CapableProvider);
// llm.CapAll when it declares nothing.
func Of(p llm.Provider) llm.Capabilities {
	if c, ok := p.(llm.CapableProvider); ok {
		return c.Capabilities()
	}
	return llm.CapAll
}

// MediaOf returns the media types p declares it takes
// (llm.MediaProvider); the zero llm.MediaTypes, which takes every media
// type, when it declares none.
func MediaOf(p llm.Provider) llm.MediaTypes {
	if m, ok := p.(llm.MediaProvider); ok {
		return m.MediaTypes()
	}
	return llm.MediaTypes{}
}

// Needs returns what req carries beyond text: the capabilities a provider
// must have to take it.
func Needs(req *llm.Request) llm.Capabilities {
	var c llm.Capabilities
	if len(req.Tools) > 0 {
		c |= llm.CapTools
	}
	if len(req.ResponseSchema) > 0 {
		c |= llm.CapNativeSchema
	}
	for i := range req.Messages {
		for _, p := range req.Messages[i].Parts {
			switch {
			case p.ToolCall != nil, p.ToolResult != nil:
				c |= llm.CapTools
			case p.Media == nil:
			case p.Media.IsDocument() && p.Media.URL != "":
				c |= llm.CapDocumentURLs
			case p.Media.IsDocument():
				c |= llm.CapDocuments
			case p.Media.URL != "":
				c |= llm.CapImageURLs
			default:
				c |= llm.CapImages
			}
		}
	}
	return c
}

// Unlimited reports whether t places no limit on media types.
func Unlimited(t llm.MediaTypes) bool { return len(t.Images) == 0 && len(t.Documents) == 0 }

// Takes reports whether a provider that declares t takes md: its
// MediaType matches an entry of the list for its kind (Images, or
// Documents when md.IsDocument), or that list is empty. Media without a
// MediaType (an image by URL) is taken: its type is not known before it is
// fetched.
func Takes(t llm.MediaTypes, md *llm.Media) bool {
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
func Refused(t llm.MediaTypes, req *llm.Request) *llm.Media {
	if Unlimited(t) {
		return nil
	}
	for i := range req.Messages {
		parts := req.Messages[i].Parts
		for j := range parts {
			if md := parts[j].Media; md != nil && !Takes(t, md) {
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

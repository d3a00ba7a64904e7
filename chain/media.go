package chain

import (
	"fmt"
	"slices"
	"strings"

	"github.com/backstop-llm/backstop/llm"
)

// carriesMedia is what a request that carries images or documents needs.
const carriesMedia = llm.CapImages | llm.CapImageURLs | llm.CapDocuments | llm.CapDocumentURLs

// untaken returns the bad request of a call whose request carries a media
// type that no model target of c takes (llm.MediaProvider): no target
// could be sent it, so the call fails before anything is sent, as a
// request every provider would refuse does. Its message names the media
// type, where it is, and the types the targets take.
func (c *Chain) untaken(req *llm.Request) error {
	for i := range req.Messages {
		m := &req.Messages[i]
		for j := range m.Parts {
			md := m.Parts[j].Media
			if md == nil || c.takenBySome(md) {
				continue
			}
			return &llm.Error{Provider: "backstop", Kind: llm.KindBadRequest, Message: fmt.Sprintf(
				"message %d (%s), part %d: no target takes %s (they take %s); convert it to one of those, or add a target whose provider takes it",
				i, m.Role, j, describeMedia(md), c.takenTypes(md.IsDocument()))}
		}
	}
	return nil
}

// takenBySome reports whether a model target of c takes md's media type.
func (c *Chain) takenBySome(md *llm.Media) bool {
	for _, t := range c.targets {
		if t.media.Takes(md) {
			return true
		}
	}
	return false
}

// takenTypes lists the media types of the kind (documents, or images) that
// the model targets take, each once, in the chain's order.
func (c *Chain) takenTypes(documents bool) string {
	var all []string
	for _, t := range c.targets {
		list := t.media.Images
		if documents {
			list = t.media.Documents
		}
		for _, mt := range list {
			if !slices.Contains(all, mt) {
				all = append(all, mt)
			}
		}
	}
	return strings.Join(all, ", ")
}

// describeMedia names md's kind and media type, for a reason or an error:
// `document media type "application/zip"`.
func describeMedia(md *llm.Media) string {
	if md.IsDocument() {
		return fmt.Sprintf("document media type %q", md.MediaType)
	}
	return fmt.Sprintf("image media type %q", md.MediaType)
}

package openai

import (
	"fmt"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
)

var (
	_ llm.CapableProvider = (*Provider)(nil)
	_ llm.MediaProvider   = (*Provider)(nil)
	_ llm.SchemaChecker   = (*Provider)(nil)
)

// Capabilities returns what Chat Completions carries: tools, images
// (inline and by URL), inline documents (a PDF as a file part's file_data,
// plain text as text) and native schemas (response_format json_schema),
// but no document by URL: a file part has file_data and file_id, no URL.
func (p *Provider) Capabilities() llm.Capabilities {
	return llm.CapAll &^ llm.CapDocumentURLs
}

// MediaTypes returns the document types Chat Completions takes: PDF (a
// file part, the only file type its file_data takes) and text (a text/…
// document goes as a text part). The adapter sends any other document as a
// file, for the API to refuse; a chain passes the target over for it
// instead. Images are not limited: OpenAI takes PNG, JPEG, WebP and GIF,
// but a compatible server may take more, so the server decides.
func (p *Provider) MediaTypes() llm.MediaTypes {
	return llm.MediaTypes{Documents: []string{"application/pdf", "text/*"}}
}

// CheckResponseSchema reports whether schema can be sent as
// llm.Request.ResponseSchema, which goes out as a strict json_schema
// response format: nil when it meets OpenAI's strict-mode rules (see
// openaiwire.CheckStrict: every property required, additionalProperties
// false at every level, a root object, no allOf, oneOf, not or if), else
// an error naming the JSON pointer at fault and what to change.
func (p *Provider) CheckResponseSchema(schema []byte) error {
	if err := openaiwire.CheckStrict(schema); err != nil {
		return fmt.Errorf("openai: %w", err)
	}
	return nil
}

package openai

import (
	"fmt"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
)

var (
	_ llm.CapableProvider = (*Provider)(nil)
	_ llm.SchemaChecker   = (*Provider)(nil)
)

// Capabilities returns what Chat Completions carries: tools, images
// (inline and by URL), inline documents (a PDF as a file part's file_data,
// plain text as text) and native schemas (response_format json_schema),
// but no document by URL: a file part has file_data and file_id, no URL.
func (p *Provider) Capabilities() llm.Capabilities {
	return llm.CapAll &^ llm.CapDocumentURLs
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

package openaisdk

import (
	"fmt"

	"github.com/backstop-llm/backstop/provider/internal/openaiwire"
)

// CheckResponseSchema reports whether schema can be sent as
// llm.Request.ResponseSchema, which goes out as a strict json_schema
// format (response_format on Chat Completions, text.format on the
// Responses API). It returns nil when schema meets OpenAI's strict-mode
// rules: the root is an object schema; every object schema lists each of
// its properties in "required" and sets "additionalProperties": false; no
// schema uses allOf, oneOf, not, if, then, else, dependentRequired or
// dependentSchemas. It walks properties, items, prefixItems, anyOf, $defs
// and definitions; an error names the JSON pointer at fault and what to
// change.
func (p *Provider) CheckResponseSchema(schema []byte) error {
	if err := openaiwire.CheckStrict(schema); err != nil {
		return fmt.Errorf("%s: %w", p.Name(), err)
	}
	return nil
}

package anthropic

import (
	"fmt"

	"github.com/backstop-llm/backstop/provider/internal/anthropicwire"
)

// CheckResponseSchema reports whether Anthropic's structured outputs
// (output_config.format json_schema) take schema as Request.ResponseSchema:
// nil when they do, else an error listing, by JSON pointer, what they
// refuse and what to change (see anthropicwire.CheckSchema for the rules:
// additionalProperties false on objects, no numerical or length
// constraints, limited string formats, no recursion). It implements
// llm.SchemaChecker.
func (p *Provider) CheckResponseSchema(schema []byte) error {
	if err := anthropicwire.CheckSchema(schema); err != nil {
		return fmt.Errorf("anthropic: %w", err)
	}
	return nil
}

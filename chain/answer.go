package chain

// Checking an answer before anyone sees it. The mechanics are
// internal/answer's (in llm's vocabulary) over package validate's checks
// and errors (validate.ToolCallError, validate.ErrUnknownTool).

import (
	"encoding/json"

	"github.com/backstop-llm/backstop/llm"
)

// checkAnswer validates an answer of t to a request with tools: its tool
// calls against the tools, or, when it calls none, its text against t's
// Schema (an answer that calls tools is not the final answer the schema
// describes). It returns the validated JSON, and the *llm.Error of
// KindInvalidOutput for an answer that fails.
func (c *Chain) checkAnswer(t *target, tools []llm.Tool, resp *llm.Response) (json.RawMessage, error) {
	return c.answers.Check(t.ob.Provider, t.schema, tools, resp)
}

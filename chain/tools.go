package chain

// Tool calls: the calls of an answer checked against the request's tools,
// each tool's InputSchema compiled once per chain (validate.SchemaCache).

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/validate"
)

// ErrUnknownTool is matched by the ToolCallError of a call that names no
// tool of the request.
var ErrUnknownTool = errors.New("the model called a tool the request does not have")

// ToolCallError is a tool call in an answer that names no tool of the
// request (ErrUnknownTool) or whose Arguments fail the tool's InputSchema
// (validate.ErrInvalid, validate.ErrBadJSON). It is the Err of the
// answer's *llm.Error, of KindInvalidOutput: the chain re-asks the target
// once, telling the model what was wrong as an error tool result, then
// moves on.
type ToolCallError struct {
	// Call is the call's place in Response.ToolCalls; ID and Name are the
	// call's.
	Call     int
	ID, Name string
	// Err says what is wrong.
	Err error
}

func (e *ToolCallError) Error() string {
	if errors.Is(e.Err, ErrUnknownTool) {
		return fmt.Sprintf("tool call %d (%s): %v", e.Call, e.Name, e.Err)
	}
	return fmt.Sprintf("tool call %d (%s): the arguments fail the tool's InputSchema: %s", e.Call, e.Name, schemaSummary(e.Err))
}

func (e *ToolCallError) Unwrap() error { return e.Err }

// feedback is what the model is told of the failed call.
func (e *ToolCallError) feedback(tools []llm.Tool) string {
	if errors.Is(e.Err, ErrUnknownTool) {
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.Name
		}
		return fmt.Sprintf("There is no tool named %q. The tools are: %s. Call one of them.", e.Name, strings.Join(names, ", "))
	}
	return "The arguments do not match the tool's input schema. " + validate.Feedback(e.Err)
}

// toolSchemas checks tool calls against the tools' InputSchemas, each
// compiled once for the chain's life (validate.SchemaCache).
type toolSchemas struct{ cache validate.SchemaCache }

// check returns the first of calls that names no tool of tools or whose
// Arguments fail its InputSchema; nil when every call is valid.
func (ts *toolSchemas) check(tools []llm.Tool, calls []llm.ToolCall) *ToolCallError {
	for i := range calls {
		c := &calls[i]
		tool := findTool(tools, c.Name)
		if tool == nil {
			return &ToolCallError{Call: i, ID: c.ID, Name: c.Name, Err: ErrUnknownTool}
		}
		if err := ts.cache.Arguments(tool.InputSchema, c.Arguments); err != nil {
			return &ToolCallError{Call: i, ID: c.ID, Name: c.Name, Err: err}
		}
	}
	return nil
}

// checkAnswer validates an answer of t to a request with tools: its tool
// calls against the tools, or, when it calls none, its text against t's
// Schema (an answer that calls tools is not the final answer the schema
// describes). It returns the validated JSON, and the *llm.Error of
// KindInvalidOutput for an answer that fails.
func (c *Chain) checkAnswer(t *target, tools []llm.Tool, resp *llm.Response) (json.RawMessage, error) {
	if len(resp.ToolCalls) > 0 {
		if terr := c.tools.check(tools, resp.ToolCalls); terr != nil {
			if errors.Is(terr.Err, validate.ErrBadSchema) {
				// The request's fault, not the model's: wrong everywhere.
				return nil, &llm.Error{Provider: "backstop", Kind: llm.KindBadRequest,
					Message: fmt.Sprintf("tool %q: InputSchema is not a valid JSON Schema", terr.Name), Detail: terr.Err.Error(), Err: terr}
			}
			return nil, &llm.Error{Provider: t.ob.Provider, Status: 200, Kind: llm.KindInvalidOutput, Code: "invalid_tool_call",
				Message: terr.Error(), RequestID: resp.RequestID, Err: terr}
		}
		return nil, nil
	}
	if t.schema == nil {
		return nil, nil
	}
	js, verr := t.schema.Validate(resp.Text)
	if verr != nil {
		return nil, invalidOutput(t.ob.Provider, 200, resp.RequestID, verr)
	}
	return js, nil
}

// findTool returns the tool of tools named name, or nil.
func findTool(tools []llm.Tool, name string) *llm.Tool {
	for i := range tools {
		if tools[i].Name == name {
			return &tools[i]
		}
	}
	return nil
}

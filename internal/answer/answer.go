// Package answer checks a model's answer for package chain, in llm's
// vocabulary: its tool calls against the request's tools (each tool's
// InputSchema compiled once per chain), its text
// against the schema; the *llm.Error that says what failed without quoting
// the answer; and the conversation that re-asks the model with the
// problems.
//
// The checks themselves and their errors (validate.ToolCallError,
// validate.ErrUnknownTool, validate.Summary, validate.Feedback) are package
// validate's, which imports nothing of the module; this package is the
// plumbing between them and llm's requests, answers and conversations,
// which validate may not import.
package answer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/validate"
)

// Checker checks answers: a chain keeps one for its life, so that each
// tool's InputSchema is compiled once. The zero value is ready to use; it
// is safe for concurrent use.
type Checker struct{ schemas schemaCache }

// Check validates an answer (resp, from provider) to a request with tools:
// its tool calls against the tools, or, when it calls none, its text
// against schema (nil: no schema; an answer that calls tools is not the
// final answer the schema describes). It returns the validated JSON, and
// the *llm.Error of KindInvalidOutput for an answer that fails (of
// KindBadRequest when a tool's InputSchema does not compile: the request's
// fault, wrong everywhere).
func (c *Checker) Check(provider string, schema *validate.Schema, tools []llm.Tool, resp *llm.Response) (json.RawMessage, error) {
	if len(resp.ToolCalls) > 0 {
		if terr := c.toolCalls(tools, resp.ToolCalls); terr != nil {
			if errors.Is(terr.Err, validate.ErrBadSchema) {
				// The request's fault, not the model's: wrong everywhere.
				return nil, &llm.Error{Provider: "backstop", Kind: llm.KindBadRequest,
					Message: fmt.Sprintf("tool %q: InputSchema is not a valid JSON Schema", terr.Name), Detail: terr.Err.Error(), Err: terr}
			}
			return nil, &llm.Error{Provider: provider, Status: 200, Kind: llm.KindInvalidOutput, Code: "invalid_tool_call",
				Message: terr.Error(), RequestID: resp.RequestID, Err: terr}
		}
		return nil, nil
	}
	if schema == nil {
		return nil, nil
	}
	js, verr := schema.Validate(resp.Text)
	if verr != nil {
		return nil, InvalidOutput(provider, 200, resp.RequestID, verr)
	}
	return js, nil
}

// toolCalls returns the first of calls that names no tool of tools or
// whose Arguments fail its InputSchema; nil when every call is valid.
func (c *Checker) toolCalls(tools []llm.Tool, calls []llm.ToolCall) *validate.ToolCallError {
	for i := range calls {
		call := &calls[i]
		tool := findTool(tools, call.Name)
		if tool == nil {
			return &validate.ToolCallError{Call: i, ID: call.ID, Name: call.Name, Err: validate.ErrUnknownTool}
		}
		if err := c.schemas.arguments(tool.InputSchema, call.Arguments); err != nil {
			return &validate.ToolCallError{Call: i, ID: call.ID, Name: call.Name, Err: err}
		}
	}
	return nil
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

// InvalidOutput is the failure of an answer that did not pass its schema
// (verr, from validate). Its Message names only where and which keyword
// failed (validate.Summary), since a violation's own message may quote the
// answer; the whole description is its Detail, which the error's text
// leaves out.
func InvalidOutput(provider string, status int, requestID string, verr error) *llm.Error {
	return &llm.Error{Provider: provider, Status: status, Kind: llm.KindInvalidOutput,
		Message: validate.Summary(verr), Detail: verr.Error(), RequestID: requestID, Err: verr}
}

// Violations lists the paths and keywords of a schema failure, for
// telemetry: never the messages, which may quote the answer. An answer
// with no JSON is one violation at the root, keyword "no_json".
func Violations(err error) (paths, keywords []string) {
	var verr *validate.ValidationError
	if !errors.As(err, &verr) {
		return []string{""}, []string{"no_json"}
	}
	for _, v := range verr.Violations {
		paths = append(paths, v.Path)
		keywords = append(keywords, v.Keyword)
	}
	return paths, keywords
}

// Reask returns the conversation to re-ask a model whose answer failed
// its check (err): msgs, the answer, and the problems. An answer that
// called tools is replayed with its calls, each answered by an error tool
// result (the problem for the call at fault, "not run" for the others),
// which is how the providers expect a model to be told; any other answer
// is followed by the problems as text (validate.Feedback). msgs is copied,
// never appended to in place.
func Reask(msgs []llm.Message, tools []llm.Tool, answer *llm.Response, err error) []llm.Message {
	out := make([]llm.Message, 0, len(msgs)+2)
	out = append(out, msgs...)
	var terr *validate.ToolCallError
	if len(answer.ToolCalls) == 0 || !errors.As(err, &terr) || !replayable(answer.ToolCalls) {
		text := answer.Text
		if text == "" {
			text = "(no text)"
		}
		return append(out,
			llm.Message{Role: llm.RoleAssistant, Content: text},
			llm.Message{Role: llm.RoleUser, Content: feedbackOf(tools, err)})
	}
	said := llm.Message{Role: llm.RoleAssistant, Content: answer.Text, Parts: make([]llm.Part, 0, len(answer.ToolCalls))}
	told := llm.Message{Role: llm.RoleUser, Parts: make([]llm.Part, 0, len(answer.ToolCalls))}
	for i, c := range answer.ToolCalls {
		said.Parts = append(said.Parts, llm.ToolCallPart(c.ID, c.Name, c.Arguments))
		why := "Not run: another tool call in this answer was invalid. Call the tools again."
		if i == terr.Call {
			why = feedback(terr, tools)
		}
		told.Parts = append(told.Parts, llm.ToolResultPart(c.ID, why, true))
	}
	return append(out, said, told)
}

// feedback is what the model is told of the failed call terr.
func feedback(terr *validate.ToolCallError, tools []llm.Tool) string {
	if errors.Is(terr.Err, validate.ErrUnknownTool) {
		names := make([]string, len(tools))
		for i, t := range tools {
			names[i] = t.Name
		}
		return fmt.Sprintf("There is no tool named %q. The tools are: %s. Call one of them.", terr.Name, strings.Join(names, ", "))
	}
	return "The arguments do not match the tool's input schema. " + validate.Feedback(terr.Err)
}

// feedbackOf is what a model is told of its failed answer, in words.
func feedbackOf(tools []llm.Tool, err error) string {
	var terr *validate.ToolCallError
	if errors.As(err, &terr) {
		return feedback(terr, tools)
	}
	return validate.Feedback(err)
}

// isJSONObject reports whether b is a JSON object.
func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// replayable reports whether calls can be replayed in a conversation:
// each has a non-empty id used once, and arguments that are a JSON object.
// Others are re-asked in words.
func replayable(calls []llm.ToolCall) bool {
	for i, c := range calls {
		if c.ID == "" || len(c.Arguments) > 0 && !isJSONObject(c.Arguments) {
			return false
		}
		for _, d := range calls[:i] {
			if d.ID == c.ID {
				return false
			}
		}
	}
	return true
}

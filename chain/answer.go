package chain

// Checking an answer before anyone sees it: its tool calls against the
// request's tools (each tool's InputSchema compiled once per chain, in
// validate.SchemaCache), its JSON against the schema; the errors that say
// what failed without quoting the answer, and the conversation that
// re-asks the model with the problems.

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

// invalidOutput is the failure of an answer that did not pass its schema
// (verr, from validate). Its Message names only where and which keyword
// failed, since a violation's own message may quote the answer ("got
// \"Jane Doe\", want ..."); the whole description is its Detail, which the
// error's text leaves out.
func invalidOutput(provider string, status int, requestID string, verr error) *llm.Error {
	return &llm.Error{Provider: provider, Status: status, Kind: llm.KindInvalidOutput,
		Message: schemaSummary(verr), Detail: verr.Error(), RequestID: requestID, Err: verr}
}

// schemaSummary describes a schema failure without quoting the answer:
// "the answer does not match the schema: at /price (type); at (root)
// (required)", at most three places, then how many more.
func schemaSummary(verr error) string {
	switch {
	case errors.Is(verr, validate.ErrNoJSON):
		return "the answer holds no JSON"
	case errors.Is(verr, validate.ErrBadJSON):
		return "the answer's JSON is not valid"
	}
	paths, keywords := violations(verr)
	var b strings.Builder
	b.WriteString("the answer does not match the schema: ")
	for i := range paths {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(paths)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		p := paths[i]
		if p == "" {
			p = "(root)"
		}
		fmt.Fprintf(&b, "at %s (%s)", p, keywords[i])
	}
	return b.String()
}

// violations lists the paths and keywords of a schema failure, for
// telemetry: never the messages, which may quote the answer.
func violations(err error) (paths, keywords []string) {
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

// reask returns the conversation to re-ask a model whose answer failed
// its check (err): msgs, the answer, and the problems. An answer that
// called tools is replayed with its calls, each answered by an error tool
// result (the problem for the call at fault, "not run" for the others),
// which is how the providers expect a model to be told; any other answer
// is followed by the problems as text (validate.Feedback). msgs is copied,
// never appended to in place.
func reask(msgs []llm.Message, tools []llm.Tool, answer *llm.Response, err error) []llm.Message {
	out := make([]llm.Message, 0, len(msgs)+2)
	out = append(out, msgs...)
	var terr *ToolCallError
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
			why = terr.feedback(tools)
		}
		told.Parts = append(told.Parts, llm.ToolResultPart(c.ID, why, true))
	}
	return append(out, said, told)
}

// isJSONObject reports whether b is a JSON object.
func isJSONObject(b []byte) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(b, &m) == nil && m != nil
}

// feedbackOf is what a model is told of its failed answer, in words.
func feedbackOf(tools []llm.Tool, err error) string {
	var terr *ToolCallError
	if errors.As(err, &terr) {
		return terr.feedback(tools)
	}
	return validate.Feedback(err)
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

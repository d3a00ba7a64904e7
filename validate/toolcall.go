package validate

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownTool is matched by the ToolCallError of a call that names no
// tool of the request.
var ErrUnknownTool = errors.New("the model called a tool the request does not have")

// ToolCallError is a tool call in an answer that names no tool of the
// request (ErrUnknownTool) or whose Arguments fail the tool's InputSchema
// (ErrInvalid, ErrBadJSON). The chain makes it the Err of the answer's
// *llm.Error, of KindInvalidOutput: it re-asks the target once, telling the
// model what was wrong as an error tool result, then moves on.
type ToolCallError struct {
	// Call is the call's place in the answer's tool calls; ID and Name are
	// the call's.
	Call     int
	ID, Name string
	// Err says what is wrong: ErrUnknownTool, or the error of the
	// arguments' check against the tool's input schema (Schema.ValidateJSON).
	Err error
}

// Error names the call and what is wrong with it, without quoting its
// arguments.
func (e *ToolCallError) Error() string {
	if errors.Is(e.Err, ErrUnknownTool) {
		return fmt.Sprintf("tool call %d (%s): %v", e.Call, e.Name, e.Err)
	}
	return fmt.Sprintf("tool call %d (%s): the arguments fail the tool's InputSchema: %s", e.Call, e.Name, Summary(e.Err))
}

// Unwrap returns Err.
func (e *ToolCallError) Unwrap() error { return e.Err }

// Summary describes an invalid answer (any error Extract, Validate,
// ValidateJSON or Decode returned for it) without quoting the answer, for
// logs and telemetry: "the answer does not match the schema: at /price
// (type); at (root) (required)", at most three places, then how many more;
// "the answer holds no JSON" (ErrNoJSON); "the answer's JSON is not valid"
// (ErrBadJSON). A violation's own message may quote the answer ("got \"Jane
// Doe\", want ..."), so Summary names only where and which keyword failed.
func Summary(err error) string {
	switch {
	case errors.Is(err, ErrNoJSON):
		return "the answer holds no JSON"
	case errors.Is(err, ErrBadJSON):
		return "the answer's JSON is not valid"
	}
	var b strings.Builder
	b.WriteString("the answer does not match the schema: ")
	var verr *ValidationError
	if !errors.As(err, &verr) {
		b.WriteString("at (root) (no_json)")
		return b.String()
	}
	for i, v := range verr.Violations {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(verr.Violations)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		p := v.Path
		if p == "" {
			p = "(root)"
		}
		fmt.Fprintf(&b, "at %s (%s)", p, v.Keyword)
	}
	return b.String()
}

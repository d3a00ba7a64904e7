package validate

import (
	"errors"
	"fmt"
	"reflect"
)

var (
	// ErrInvalid is matched by every answer that fails: an answer with no
	// JSON in it (ErrNoJSON), JSON that does not parse (ErrBadJSON) and JSON
	// that violates the schema (*ValidationError). The chain treats it as
	// llm.KindInvalidOutput: it re-asks the model once, with Feedback(err),
	// then moves on to the next target.
	ErrInvalid = errors.New("validate: invalid answer")

	// ErrNoJSON is returned by Extract, and by Validate and Decode, when the
	// answer holds no JSON by the extraction rule (see Extract). It matches
	// ErrInvalid.
	ErrNoJSON = fmt.Errorf("%w: no JSON found: the text is not JSON, has no ``` fenced block holding JSON "+
		"and no {...} or [...] span that parses; ask the model to answer with the JSON alone", ErrInvalid)

	// ErrBadJSON is returned by ValidateJSON when its input does not parse
	// as exactly one JSON value. It matches ErrInvalid.
	ErrBadJSON = fmt.Errorf("%w: not valid JSON", ErrInvalid)

	// ErrBadSchema is matched by every error Compile returns. It is a configuration error, never an invalid answer.
	ErrBadSchema = errors.New("validate: bad schema")

	// ErrTypeMismatch is matched by the *DecodeError Decode returns when an
	// answer passed the schema but does not unmarshal into the Go type: the
	// schema and the type disagree. It does not match ErrInvalid: the model
	// did what the schema asked, so re-asking it does not help.
	ErrTypeMismatch = errors.New("validate: the schema and the Go type disagree")
)

// schemaError is the error Compile returns for a schema it cannot use: not
// JSON, not a valid JSON Schema, a $ref that does not resolve (references
// outside the document are never fetched), an unknown $schema, or a pattern
// Go's regexp cannot compile. It matches ErrBadSchema, and errors.As reaches
// the jsonschema library's own error through Err.
type schemaError struct {
	// Problem is what was wrong, in backstop's words ("the schema is not
	// JSON", "the schema does not compile").
	Problem string
	// Err is the underlying error: encoding/json's, or
	// github.com/santhosh-tekuri/jsonschema/v6's, whose description Error
	// quotes.
	Err error
}

// Error says what was wrong and quotes the library's description.
func (e *schemaError) Error() string {
	return fmt.Sprintf("%v: %s (fix the schema given to validate.Compile: drafts 2020-12 and 7, "+
		"every $ref inside the document): %v", ErrBadSchema, e.Problem, e.Err)
}

// Unwrap returns ErrBadSchema and the underlying error.
func (e *schemaError) Unwrap() []error { return []error{ErrBadSchema, e.Err} }

// DecodeError is the error Decode returns when an answer passed the schema
// but json.Unmarshal cannot put it into the Go type T: the schema allows what
// T cannot hold (a string where T has a number, a number too large for an
// int, ...). It matches ErrTypeMismatch, not ErrInvalid. To fix it, make the
// schema as strict as T, or T as loose as the schema.
type DecodeError struct {
	// Type is the Go type the answer was decoded into.
	Type reflect.Type
	// Err is json.Unmarshal's error.
	Err error
}

// Error names the Go type and quotes encoding/json.
func (e *DecodeError) Error() string {
	return fmt.Sprintf("%v: the answer passed the schema but does not decode into %v: %v; "+
		"make the schema as strict as %v, or the type as loose as the schema", ErrTypeMismatch, e.Type, e.Err, e.Type)
}

// Unwrap returns ErrTypeMismatch and json.Unmarshal's error.
func (e *DecodeError) Unwrap() []error { return []error{ErrTypeMismatch, e.Err} }

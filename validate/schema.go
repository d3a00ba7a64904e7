package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schemaURL is where Compile files the schema: the base of its relative
// references and the prefix SchemaPath is reported without.
const schemaURL = "mem:///schema.json"

// Schema is a compiled JSON Schema. It is immutable and safe for concurrent
// use: compile it once (at chain.Build) and share it.
type Schema struct {
	sch *jsonschema.Schema
}

// Compile compiles a JSON Schema document.
//
// The draft is chosen by the document's $schema: draft 2020-12
// ("https://json-schema.org/draft/2020-12/schema") and draft 7
// ("http://json-schema.org/draft-07/schema#") are the ones backstop tests;
// 2019-09, 6 and 4 are accepted as github.com/santhosh-tekuri/jsonschema/v6
// supports them. Without $schema the document is read as draft 2020-12.
//
// Unlike the bare library, "format" is asserted in every draft (date-time,
// date, time, duration, email, hostname, ipv4, ipv6, uri, uri-reference,
// uuid, regex, json-pointer, ...): an answer whose "email" is not an email
// fails. Unknown formats are ignored. Content keywords (contentEncoding,
// contentMediaType) are annotations only. Patterns are Go regexps (RE2: no
// lookaround, linear time).
//
// References resolve inside the document only ("#/$defs/price",
// "#/definitions/price", anchors, $id-relative ones); Compile never reads a
// file or the network, and a $ref to another document is a bad schema.
//
// Any problem (the bytes are not JSON, the document is not a valid schema
// for its draft, a $ref does not resolve, a pattern does not compile, an
// unknown $schema, a document larger than 1 MiB or nesting deeper
// than 128) returns an error that matches ErrBadSchema
// and quotes the library's description of the problem.
func Compile(schema []byte) (*Schema, error) {
	if len(bytes.TrimSpace(schema)) == 0 {
		return nil, &schemaError{Problem: "the schema is empty", Err: errors.New("no bytes to compile")}
	}
	if len(schema) > maxSchemaBytes {
		return nil, &schemaError{Problem: fmt.Sprintf("the schema is %d bytes, more than the %d allowed", len(schema), maxSchemaBytes),
			Err: errSchemaTooLarge}
	}
	if d := depth(schema); d > maxSchemaDepth {
		return nil, &schemaError{Problem: fmt.Sprintf("the schema nests objects and arrays %d deep, more than the %d allowed; flatten it with $defs and $ref", d, maxSchemaDepth),
			Err: errSchemaTooLarge}
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, &schemaError{Problem: "the schema is not JSON", Err: err}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, &schemaError{Problem: "the schema cannot be added", Err: err}
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, &schemaError{Problem: "the schema does not compile", Err: err}
	}
	return &Schema{sch: sch}, nil
}

// Limits on the schemas Compile accepts. The JSON Schema library's
// compile time grows faster than the square of the nesting (400 levels of
// "properties" take a quarter of a second on one core, 800 nearly two),
// so a schema that nests deeper, or is larger, than any real answer's
// would hold Build for minutes: it is refused instead.
const (
	// maxSchemaDepth is how deep a schema document may nest JSON objects
	// and arrays (each "properties" level is two). 128 compiles in
	// milliseconds.
	maxSchemaDepth = 128
	// maxSchemaBytes is the largest schema document, 1 MiB.
	maxSchemaBytes = 1 << 20
)

var errSchemaTooLarge = errors.New("schema over backstop's limits")

// depth returns how deep b nests JSON objects and arrays, counting only
// brackets outside strings; it stops counting at maxSchemaDepth+1.
func depth(b []byte) int {
	d, deepest := 0, 0
	in, esc := false, false
	for _, c := range b {
		switch {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			in = !in
		case in:
		case c == '{' || c == '[':
			if d++; d > deepest {
				if deepest = d; deepest > maxSchemaDepth {
					return deepest
				}
			}
		case c == '}' || c == ']':
			d--
		}
	}
	return deepest
}

// noLoader refuses every document but the one being compiled (the
// metaschemas are embedded in the library and never reach a loader).
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("backstop never loads a schema from outside the document (%s): "+
		"inline what $ref points to under $defs, and use a standard $schema", url)
}

// draftOf returns the draft the schema was compiled with: 2020 (for
// 2020-12), 2019 (2019-09), 7, 6 or 4.
func (s *Schema) draftOf() int { return s.sch.DraftVersion }

// Validate extracts the JSON from a model's answer (see Extract) and
// validates it against the schema.
//
// On success it returns the JSON exactly as the model wrote it (a copy of
// the extracted substring: white space and key order kept, not compacted).
// On failure it returns nil and ErrNoJSON when the answer holds no JSON, or
// a *ValidationError listing every violation; both match ErrInvalid, and
// Feedback(err) describes either to the model.
//
// Numbers are compared exactly (as decimals, not float64): an integer
// beyond 2^53 or a price of 0.1 validates as written.
func (s *Schema) Validate(text string) (json.RawMessage, error) {
	j, err := Extract(text)
	if err != nil {
		return nil, err
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(j))
	if err != nil { // Extract returns only what json.Valid accepts
		return nil, fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	if err := s.check(inst); err != nil {
		return nil, err
	}
	return json.RawMessage(j), nil
}

// ValidateJSON validates JSON that is already extracted: v must be exactly
// one JSON value (white space around it is allowed). It returns nil, an
// error matching ErrBadJSON (and ErrInvalid) when v does not parse, or a
// *ValidationError.
func (s *Schema) ValidateJSON(v []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(v))
	if err != nil {
		return fmt.Errorf("%w: %v", ErrBadJSON, err)
	}
	return s.check(inst)
}

// check validates a decoded instance and translates the library's error.
func (s *Schema) check(inst any) error {
	err := s.sch.Validate(inst)
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return newValidationError(verr)
}

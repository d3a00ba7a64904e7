// Package validate owns what stands between a model's answer and the
// caller: finding the JSON in the answer (Extract), checking it against the
// chain's JSON Schema (Compile, Schema.Validate, on
// github.com/santhosh-tekuri/jsonschema/v6), describing every violation
// (ValidationError; Feedback for the model when the chain re-asks
// it, and a Summary that never quotes the answer, for logs), checking a
// tool call's arguments against its tool's input schema (Compile and
// Schema.ValidateJSON; ToolCallError, ErrUnknownTool), and decoding the validated JSON into a Go
// type (Decode).
//
// Every answer, whichever target or degradation produced it, goes through
// Schema.Validate before the caller sees it or a cache remembers it. Every
// failure matches ErrInvalid: no JSON in the answer (ErrNoJSON), JSON that
// does not parse (ErrBadJSON), JSON that breaks the schema
// (*ValidationError). A schema that cannot be compiled is ErrBadSchema, an
// error of configuration reported by chain.Build, and a schema that allows
// what the Go type cannot hold is ErrTypeMismatch.
//
// # Finding the JSON
//
// Extract takes the first of:
//
//  1. the whole answer, trimmed, when it is one JSON value;
//  2. the first ``` fenced block (```json or bare) whose trimmed content is
//     one JSON value;
//  3. the first {...} or [...] span that parses, scanning left to right,
//     pairing brackets outside JSON strings; of nested spans, the outer one.
//
// The result is always a substring of the answer that json.Valid accepts,
// and the search is linear in the answer's length, however adversarial.
// Extract documents the rule to the byte.
//
// # Schemas
//
// Drafts 2020-12 (the default when $schema is absent) and 7 are tested;
// "format" is asserted; references never leave the document (no file or
// network access); numbers are compared as exact decimals.
package validate

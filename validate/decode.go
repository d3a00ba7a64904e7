package validate

import (
	"encoding/json"
	"reflect"
)

// Decode validates a model's answer (as s.Validate) and unmarshals the
// validated JSON into a T with encoding/json. It returns the value and the
// validated JSON.
//
// An invalid answer returns the zero T, nil and Validate's error (matching
// ErrInvalid). An answer that passed the schema but that json.Unmarshal
// cannot put into T returns the zero T, the validated JSON and a
// *DecodeError naming T (matching ErrTypeMismatch, not ErrInvalid): the
// schema allows what T cannot hold, a bug to fix in one or the other rather
// than an answer to re-ask for. Unknown fields are ignored, as json.Unmarshal
// does.
func Decode[T any](s *Schema, text string) (T, json.RawMessage, error) {
	var v T
	raw, err := s.Validate(text)
	if err != nil {
		return v, nil, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		var zero T
		return zero, raw, &DecodeError{Type: reflect.TypeFor[T](), Err: err}
	}
	return v, raw, nil
}

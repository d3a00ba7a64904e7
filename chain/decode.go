package chain

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/validate"
)

// Decode calls c and decodes the answer's JSON into a T. With a chain
// Schema the JSON is the validated Result.JSON; without one it is extracted
// from the answer by validate.Extract's rule. An answer with no valid JSON
// is an error matching validate.ErrInvalid (joined into ErrExhausted when
// every target failed); JSON that passed the schema but does not fit T is an
// error matching validate.ErrTypeMismatch. The Result is returned in every
// case.
func Decode[T any](ctx context.Context, c *Chain, req llm.Request) (T, *Result, error) {
	var v T
	res, err := c.Call(ctx, req)
	if err != nil {
		return v, res, err
	}
	raw := res.JSON
	if raw == nil {
		s, err := validate.Extract(res.Text)
		if err != nil {
			return v, res, fmt.Errorf("chain %q: %w", c.name, err)
		}
		raw = json.RawMessage(s)
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, res, fmt.Errorf("chain %q: %w", c.name, &validate.DecodeError{Type: reflect.TypeFor[T](), Err: err})
	}
	return v, res, nil
}

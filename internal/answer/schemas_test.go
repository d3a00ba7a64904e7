package answer

import (
	"errors"
	"fmt"
	"testing"

	"github.com/backstop-llm/backstop/validate"
)

func TestSchemaCacheCompilesOnce(t *testing.T) {
	var c schemaCache
	schema := []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	a, err := c.get(schema)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.get(append([]byte(nil), schema...)) // equal bytes, another slice
	if err != nil || a != b {
		t.Fatalf("compiled twice: %p %p %v", a, b, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = c.get(schema) }); n != 0 {
		t.Fatalf("a cached Get allocates %v times", n)
	}
}

func TestSchemaCacheArguments(t *testing.T) {
	var c schemaCache
	schema := []byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)
	for _, tc := range []struct {
		schema, args string
		want         error
	}{
		{string(schema), `{"city":"Paris"}`, nil},
		{string(schema), `{"town":"Paris"}`, validate.ErrInvalid},
		{string(schema), `{"city":`, validate.ErrBadJSON},
		{string(schema), ``, validate.ErrInvalid}, // {} lacks city
		{``, ``, nil},                    // no schema: any object
		{``, `[1]`, validate.ErrInvalid}, // but an object
		{`{"type": 12}`, `{}`, validate.ErrBadSchema},
	} {
		err := c.arguments([]byte(tc.schema), []byte(tc.args))
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Arguments(%s, %s) = %v, want %v", tc.schema, tc.args, err, tc.want)
		}
	}
}

func TestSchemaCacheIsBounded(t *testing.T) {
	var c schemaCache
	for i := range maxCached + 10 {
		if _, err := c.get(fmt.Appendf(nil, `{"type":"object","title":"s%d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(c.m); n > maxCached {
		t.Fatalf("%d schemas kept, more than MaxCached", n)
	}
}

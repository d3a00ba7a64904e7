package validate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/validate"
)

// nested returns a schema whose "properties" nest levels deep.
func nested(levels int) []byte {
	return []byte(strings.Repeat(`{"type":"object","properties":{"a":`, levels) + `{"type":"string"}` + strings.Repeat(`}}`, levels))
}

// TestCompileRefusesWhatWouldHangBuild: a schema nested thousands of levels
// deep held Build for minutes inside the library; it is refused at once
// with the limit it broke, as is one over 1 MiB. Brackets inside
// strings do not count.
func TestCompileRefusesWhatWouldHangBuild(t *testing.T) {
	for name, schema := range map[string][]byte{
		"3000 levels":    nested(3000),
		"64 levels":      nested(validate.MaxSchemaDepth / 2), // 129 deep
		"over the bytes": []byte(`{"description":"` + strings.Repeat("x", validate.MaxSchemaBytes) + `"}`),
	} {
		_, err := validate.Compile(schema)
		if !errors.Is(err, validate.ErrBadSchema) || !strings.Contains(err.Error(), "allowed") {
			t.Errorf("%s: got %v; want ErrBadSchema naming the limit", name, err)
		}
	}
	for name, schema := range map[string][]byte{
		"63 levels":         nested(validate.MaxSchemaDepth/2 - 1), // 127 deep
		"brackets in text":  []byte(`{"description":"` + strings.Repeat("[{", 500) + `\"]"}`),
		"deep escaped text": []byte(`{"pattern":"^\\[` + strings.Repeat(`\\{`, 300) + `$"}`),
	} {
		if _, err := validate.Compile(schema); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

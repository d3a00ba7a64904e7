package genai

import (
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

// TestValidateRefusesWhatWouldFailLater: values New used to take silently
// are refused by Validate (and so by New), each naming the field.
func TestValidateRefusesWhatWouldFailLater(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		// Deployment().Region would be " europe-west4" on the Gemini API,
		// which no chain's AllowRegions names.
		{Config{Region: " europe-west4"}, "Config.Region"},
		// A key with its file's newline is redacted as written, so the
		// key itself would not be where it appears without it.
		{Config{APIKey: "AIzaSy0123456789abcdef\n"}, "Config.APIKey"},
		{Config{APIKey: "AIzaSy0123456789abcdef "}, "Config.APIKey"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: Validate = %v, want an error matching llm.ErrInvalidConfig naming %s", tc.cfg, err, tc.field)
		}
		if _, err := New(geminiClient(t, "http://127.0.0.1:1", nil), tc.cfg); err == nil {
			t.Errorf("%+v: New accepted it", tc.cfg)
		}
	}
}

// TestValidateReportsEveryProblem: one call names every field to change.
func TestValidateReportsEveryProblem(t *testing.T) {
	err := Config{Name: " x", MaxResponseBytes: -1}.Validate()
	for _, field := range []string{"Config.Name", "Config.MaxResponseBytes"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate = %v, want it to name %s", err, field)
		}
	}
}

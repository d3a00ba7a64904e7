package anthropicsdk

import (
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

// TestValidateRefusesWhatWouldFailLater: values New used to take silently
// and that fail or mislead only once requests are sent are refused by
// Validate (and so by New), each naming the field.
func TestValidateRefusesWhatWouldFailLater(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		// Every Bedrock request would be refused: the SigV4 scope says
		// "eu-west-1", which is not "eu-west-1 ".
		{Config{Platform: PlatformBedrock, Region: "eu-west-1 "}, "Config.Region"},
		{Config{Platform: PlatformVertex, Region: " europe-west4"}, "Config.Region"},
		// Telemetry and errors would carry the spaces.
		{Config{Name: "claude-eu "}, "Config.Name"},
		// A key read from a file with its newline: redacted as "key\n",
		// so the key itself would not be where it appears without it.
		{Config{APIKey: "sk-ant-0123456789abcdef\n"}, "Config.APIKey"},
		{Config{APIKey: " sk-ant-0123456789abcdef"}, "Config.APIKey"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: Validate = %v, want an error matching llm.ErrInvalidConfig naming %s", tc.cfg, err, tc.field)
		}
		if _, err := New(newClient(t, "http://127.0.0.1:1"), tc.cfg); err == nil {
			t.Errorf("%+v: New accepted it", tc.cfg)
		}
	}
}

// TestValidateReportsEveryProblem: one call names every field to change.
func TestValidateReportsEveryProblem(t *testing.T) {
	err := Config{Platform: "azure", MaxResponseBytes: -1, Name: " x"}.Validate()
	for _, field := range []string{"Config.Platform", "Config.MaxResponseBytes", "Config.Name"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate = %v, want it to name %s", err, field)
		}
	}
}

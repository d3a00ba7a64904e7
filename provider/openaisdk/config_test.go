package openaisdk

import (
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestValidateRefusesMiscasedPlatforms: "Azure" or "OpenAI" used to be
// taken silently as the name of a compatible server, so the provider was
// named "Azure" instead of "azure.ai.openai" and Deployment's Platform
// was not "azure". The platforms Name knows are written in lower case.
func TestValidateRefusesMiscasedPlatforms(t *testing.T) {
	for _, platform := range []string{"Azure", "AZURE", "OpenAI"} {
		cfg := Config{Platform: platform}
		err := cfg.Validate()
		if err == nil || !errors.Is(err, llm.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.Platform") {
			t.Errorf("%q: Validate = %v, want an error matching llm.ErrInvalidConfig naming Config.Platform", platform, err)
		}
		if _, err := New(openai.NewClient(option.WithAPIKey("k")), cfg); err == nil {
			t.Errorf("%q: New accepted it", platform)
		}
	}
	// A compatible server's name is the caller's to choose.
	for _, platform := range []string{"vllm", "Groq", "azure", "openai"} {
		if err := (Config{Platform: platform}).Validate(); err != nil {
			t.Errorf("%q refused: %v", platform, err)
		}
	}
}

// TestValidateReportsEveryProblem: one call names every field to change.
func TestValidateReportsEveryProblem(t *testing.T) {
	err := Config{API: "completions", MaxResponseBytes: -1, APIKey: "k\n"}.Validate()
	for _, field := range []string{"Config.API", "Config.MaxResponseBytes", "Config.APIKey"} {
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("Validate = %v, want it to name %s", err, field)
		}
	}
}

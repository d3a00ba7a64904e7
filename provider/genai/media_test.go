package genai

import (
	"testing"

	"github.com/backstop-llm/backstop/internal/capability"

	"github.com/backstop-llm/backstop/llm"
)

// TestMediaTypes: no media type is ruled out on either platform: the
// adapter sends each as it is and the API decides.
func TestMediaTypes(t *testing.T) {
	p := newProvider(t, geminiClient(t, "http://127.0.0.1:1", nil), Config{})
	if _, ok := any(p).(llm.MediaProvider); !ok {
		t.Fatal("the provider does not declare its media types")
	}
	if m := capability.MediaOf(p); !capability.Unlimited(m) {
		t.Errorf("media types %+v; want no limit", m)
	}
}

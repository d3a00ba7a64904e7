package openaisdk

import (
	"testing"

	"github.com/backstop-llm/backstop/internal/capability"

	"github.com/backstop-llm/backstop/llm"
)

// TestMediaTypes: Chat Completions takes PDFs and text documents only, the
// Responses API every document type (it decides); neither limits images
// (a compatible server may take more than OpenAI).
func TestMediaTypes(t *testing.T) {
	chat := capability.MediaOf(newProvider(t, "http://127.0.0.1:1", APIChat))
	responses := capability.MediaOf(newProvider(t, "http://127.0.0.1:1", APIResponses))
	for mt, want := range map[string][2]bool{ // taken on chat, on responses
		"application/pdf": {true, true}, "text/markdown; charset=utf-8": {true, true},
		"application/zip": {false, true}, "application/vnd.openxmlformats-officedocument.wordprocessingml.document": {false, true},
		"image/png": {true, true}, "image/bmp": {true, true},
	} {
		md := &llm.Media{MediaType: mt, Data: []byte("x")}
		if got := [2]bool{capability.Takes(chat, md), capability.Takes(responses, md)}; got != want {
			t.Errorf("%s: taken on chat, responses %v; want %v", mt, got, want)
		}
	}
}

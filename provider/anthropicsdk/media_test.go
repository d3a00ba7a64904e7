package anthropicsdk

import (
	"testing"

	"github.com/backstop-llm/backstop/internal/capability"

	"github.com/backstop-llm/backstop/llm"
)

// TestMediaTypesMatchTheTranslation: the document types the provider
// declares are those its translation takes, and the image types are the
// four the Messages API takes.
func TestMediaTypesMatchTheTranslation(t *testing.T) {
	p, err := New(newClient(t, "http://127.0.0.1:1"), Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := capability.MediaOf(p)
	c := p.newCall(false)
	for _, mt := range []string{"application/pdf", "text/plain", "text/markdown; charset=utf-8", "TEXT/CSV", "application/zip", "application/msword", "application/json"} {
		md := &llm.Media{MediaType: mt, Data: []byte("x")}
		_, err := c.media(md, 0, 0)
		if capability.Takes(m, md) != (err == nil) {
			t.Errorf("%s: declared taken %v, translation error %v", mt, capability.Takes(m, md), err)
		}
	}
	for mt, want := range map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true, "image/bmp": false, "image/heic": false} {
		if got := capability.Takes(m, &llm.Media{MediaType: mt, Data: []byte("x")}); got != want {
			t.Errorf("%s: taken %v, want %v", mt, got, want)
		}
	}
}

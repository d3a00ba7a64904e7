package capability_test

import (
	"encoding/json"
	"testing"

	"github.com/backstop-llm/backstop/internal/capability"
	"github.com/backstop-llm/backstop/llm"
)

func TestTakes(t *testing.T) {
	anthropicLike := llm.MediaTypes{
		Images:    []string{"image/jpeg", "image/png", "image/gif", "image/webp"},
		Documents: []string{"application/pdf", "text/*"},
	}
	for _, tc := range []struct {
		name string
		t    llm.MediaTypes
		md   llm.Media
		want bool
	}{
		{"zero takes any document", llm.MediaTypes{}, llm.Media{MediaType: "application/zip", Data: []byte("x")}, true},
		{"zero takes any image", llm.MediaTypes{}, llm.Media{MediaType: "image/bmp", Data: []byte("x")}, true},
		{"pdf", anthropicLike, llm.Media{MediaType: "application/pdf", Data: []byte("x")}, true},
		{"case and parameters ignored", anthropicLike, llm.Media{MediaType: " Application/PDF ; name=a.pdf", Data: []byte("x")}, true},
		{"wildcard subtype", anthropicLike, llm.Media{MediaType: "text/markdown; charset=utf-8", Data: []byte("x")}, true},
		{"wildcard wants a subtype", anthropicLike, llm.Media{MediaType: "text/", Data: []byte("x")}, false},
		{"wildcard is not a prefix", anthropicLike, llm.Media{MediaType: "textual/plain", Data: []byte("x")}, false},
		{"zip refused", anthropicLike, llm.Media{MediaType: "application/zip", Data: []byte("x")}, false},
		{"image listed", anthropicLike, llm.Media{MediaType: "image/webp", Data: []byte("x")}, true},
		{"image refused", anthropicLike, llm.Media{MediaType: "image/bmp", Data: []byte("x")}, false},
		{"image by URL without a type", anthropicLike, llm.Media{URL: "https://x.test/a.bmp"}, true},
		{"documents limited, images not", llm.MediaTypes{Documents: []string{"application/pdf"}}, llm.Media{MediaType: "image/tiff", Data: []byte("x")}, true},
		{"images limited, documents not", llm.MediaTypes{Images: []string{"image/png"}}, llm.Media{MediaType: "application/zip", Data: []byte("x")}, true},
	} {
		if got := capability.Takes(tc.t, &tc.md); got != tc.want {
			t.Errorf("%s: Takes(%q) = %v, want %v", tc.name, tc.md.MediaType, got, tc.want)
		}
	}
}

func TestRefused(t *testing.T) {
	pdfOnly := llm.MediaTypes{Documents: []string{"application/pdf"}}
	req := llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Content: "hi"},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("see"), llm.DocumentPart("application/pdf", []byte("%PDF")), llm.DocumentPart("application/zip", []byte("PK"))}},
	}}
	if md := capability.Refused(pdfOnly, &req); md == nil || md.MediaType != "application/zip" {
		t.Errorf("Refused = %+v, want the zip", md)
	}
	if md := capability.Refused(llm.MediaTypes{}, &req); md != nil {
		t.Errorf("the zero MediaTypes refused %+v", md)
	}
	if md := capability.Refused(llm.MediaTypes{Documents: []string{"application/*"}}, &req); md != nil {
		t.Errorf("application/* refused %+v", md)
	}
}

type typed struct{ plain }

func (typed) MediaTypes() llm.MediaTypes {
	return llm.MediaTypes{Documents: []string{"application/pdf"}}
}

func TestMediaOf(t *testing.T) {
	if m := capability.MediaOf(plain{}); !capability.Unlimited(m) {
		t.Errorf("a provider that declares nothing: %+v, want the zero MediaTypes (any)", m)
	}
	if m := capability.MediaOf(typed{}); capability.Unlimited(m) || m.Documents[0] != "application/pdf" {
		t.Errorf("declared: %+v", m)
	}
}

func TestNeeds(t *testing.T) {
	req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi", Parts: []llm.Part{llm.ImagePart("image/png", []byte{1}), llm.DocumentURLPart("https://x/a.pdf")}}},
		ResponseSchema: json.RawMessage(`{}`)}
	if got, want := capability.Needs(&req), llm.CapImages|llm.CapDocumentURLs|llm.CapNativeSchema; got != want {
		t.Fatalf("Needs = %v, want %v", got, want)
	}
	if got := capability.Needs(&llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}}); got != 0 {
		t.Fatalf("text needs %v", got)
	}
}

func TestOf(t *testing.T) {
	if c := capability.Of(plain{}); c != llm.CapAll {
		t.Errorf("a provider that declares nothing: %v, want every capability", c)
	}
}

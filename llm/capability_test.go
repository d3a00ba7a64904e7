package llm

import (
	"context"
	"testing"
)

func TestMediaTypesTakes(t *testing.T) {
	anthropicLike := MediaTypes{
		Images:    []string{"image/jpeg", "image/png", "image/gif", "image/webp"},
		Documents: []string{"application/pdf", "text/*"},
	}
	for _, tc := range []struct {
		name string
		t    MediaTypes
		md   Media
		want bool
	}{
		{"zero takes any document", MediaTypes{}, Media{MediaType: "application/zip", Data: []byte("x")}, true},
		{"zero takes any image", MediaTypes{}, Media{MediaType: "image/bmp", Data: []byte("x")}, true},
		{"pdf", anthropicLike, Media{MediaType: "application/pdf", Data: []byte("x")}, true},
		{"case and parameters ignored", anthropicLike, Media{MediaType: " Application/PDF ; name=a.pdf", Data: []byte("x")}, true},
		{"wildcard subtype", anthropicLike, Media{MediaType: "text/markdown; charset=utf-8", Data: []byte("x")}, true},
		{"wildcard wants a subtype", anthropicLike, Media{MediaType: "text/", Data: []byte("x")}, false},
		{"wildcard is not a prefix", anthropicLike, Media{MediaType: "textual/plain", Data: []byte("x")}, false},
		{"zip refused", anthropicLike, Media{MediaType: "application/zip", Data: []byte("x")}, false},
		{"image listed", anthropicLike, Media{MediaType: "image/webp", Data: []byte("x")}, true},
		{"image refused", anthropicLike, Media{MediaType: "image/bmp", Data: []byte("x")}, false},
		{"image by URL without a type", anthropicLike, Media{URL: "https://x.test/a.bmp"}, true},
		{"documents limited, images not", MediaTypes{Documents: []string{"application/pdf"}}, Media{MediaType: "image/tiff", Data: []byte("x")}, true},
		{"images limited, documents not", MediaTypes{Images: []string{"image/png"}}, Media{MediaType: "application/zip", Data: []byte("x")}, true},
	} {
		if got := tc.t.Takes(&tc.md); got != tc.want {
			t.Errorf("%s: Takes(%q) = %v, want %v", tc.name, tc.md.MediaType, got, tc.want)
		}
	}
}

func TestMediaTypesRefused(t *testing.T) {
	pdfOnly := MediaTypes{Documents: []string{"application/pdf"}}
	req := Request{Messages: []Message{
		{Role: RoleUser, Content: "hi"},
		{Role: RoleUser, Parts: []Part{TextPart("see"), DocumentPart("application/pdf", []byte("%PDF")), DocumentPart("application/zip", []byte("PK"))}},
	}}
	if md := pdfOnly.Refused(&req); md == nil || md.MediaType != "application/zip" {
		t.Errorf("Refused = %+v, want the zip", md)
	}
	if md := (MediaTypes{}).Refused(&req); md != nil {
		t.Errorf("the zero MediaTypes refused %+v", md)
	}
	if md := (MediaTypes{Documents: []string{"application/*"}}).Refused(&req); md != nil {
		t.Errorf("application/* refused %+v", md)
	}
}

type plain struct{}

func (plain) Name() string { return "plain" }
func (plain) Complete(context.Context, Request) (*Response, error) {
	return &Response{}, nil
}

type typed struct{ plain }

func (typed) MediaTypes() MediaTypes { return MediaTypes{Documents: []string{"application/pdf"}} }

func TestMediaTypesOf(t *testing.T) {
	if m := MediaTypesOf(plain{}); !m.IsZero() {
		t.Errorf("a provider that declares nothing: %+v, want the zero MediaTypes (any)", m)
	}
	if m := MediaTypesOf(typed{}); m.IsZero() || m.Documents[0] != "application/pdf" {
		t.Errorf("declared: %+v", m)
	}
}

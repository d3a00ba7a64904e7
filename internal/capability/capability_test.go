package capability_test

import (
	"errors"
	"testing"

	"github.com/backstop-llm/backstop/internal/capability"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/policy"
)

func TestAdmit(t *testing.T) {
	pdfOnly := llm.MediaTypes{Documents: []string{"application/pdf"}}
	zip := &llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Parts: []llm.Part{llm.DocumentPart("application/zip", []byte("PK"))}}}}
	for _, tc := range []struct {
		name   string
		t      capability.Target
		a      policy.Attempt
		err    error
		reason string
		cause  observe.SkipCause
	}{
		{"carries it", capability.Target{Caps: llm.CapAll, ContextWindow: 1000}, policy.Attempt{Needs: llm.CapTools, MinWindow: 999}, nil, "", 0},
		{"lacks images", capability.Target{Caps: llm.CapAll &^ llm.CapImages}, policy.Attempt{Needs: llm.CapImages, MinWindow: -1},
			capability.ErrCapability, "cannot carry images", observe.SkipCapability},
		{"media type", capability.Target{Caps: llm.CapAll, Media: pdfOnly}, policy.Attempt{Needs: llm.CapDocuments, Media: zip, MinWindow: -1},
			capability.ErrCapability, `cannot carry document media type "application/zip"`, observe.SkipCapability},
		{"any media type", capability.Target{Caps: llm.CapAll}, policy.Attempt{Needs: llm.CapDocuments, Media: zip, MinWindow: -1}, nil, "", 0},
		{"window", capability.Target{Caps: llm.CapAll, ContextWindow: 200000}, policy.Attempt{MinWindow: 200000},
			capability.ErrContextWindow, "context window 200000 not larger than 200000", observe.SkipContextWindow},
		{"window unknown", capability.Target{Caps: llm.CapAll, Model: "my-model"}, policy.Attempt{MinWindow: 8000},
			capability.ErrContextWindow, `context window unknown: the catalogue does not know model "my-model"; set the target's ContextWindow, or add the model with Builder.Catalog`, observe.SkipContextWindow},
	} {
		adm := tc.t.Admit(t.Context(), &tc.a)
		if !errors.Is(adm.Err, tc.err) || (tc.err == nil) != (adm.Err == nil) || adm.Reason != tc.reason || adm.Cause != tc.cause {
			t.Errorf("%s: %v, %q, cause %v; want %v, %q, %v", tc.name, adm.Err, adm.Reason, adm.Cause, tc.err, tc.reason, tc.cause)
		}
	}
}

func TestUntaken(t *testing.T) {
	req := &llm.Request{Messages: []llm.Message{
		{Role: llm.RoleUser, Parts: []llm.Part{llm.TextPart("see"), llm.ImagePart("image/png", []byte{1})}},
		{Role: llm.RoleAssistant, Content: "ok"},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.DocumentPart("application/zip", []byte("PK"))}},
	}}
	a := &capability.Target{Media: llm.MediaTypes{Images: []string{"image/png"}, Documents: []string{"application/pdf", "text/*"}}}
	b := &capability.Target{Media: llm.MediaTypes{Images: []string{"image/jpeg"}, Documents: []string{"text/*", "text/csv"}}}
	err := capability.Untaken(req, []*capability.Target{a, b})
	want := `message 2 (user), part 0: no target takes document media type "application/zip" (they take application/pdf, text/*, text/csv); convert it to one of those, or add a target whose provider takes it`
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindBadRequest || le.Message != want {
		t.Fatalf("Untaken = %v; want a bad request saying\n%s", err, want)
	}
	if err := capability.Untaken(req, []*capability.Target{a, b, {}}); err != nil {
		t.Fatalf("a target that declares no media types takes every one: %v", err)
	}
}

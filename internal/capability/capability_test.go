package capability_test

import (
	"context"
	"errors"
	"strings"
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

// provider takes a native schema unless its checker refuses it.
type provider struct{ refuse error }

func (provider) Name() string { return "p" }
func (provider) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return &llm.Response{}, nil
}
func (p provider) CheckResponseSchema([]byte) error { return p.refuse }

func TestNative(t *testing.T) {
	own, chainwide := []byte(`{"type":"object"}`), []byte(`{"type":"string"}`)
	refused := errors.New("no enum")
	for _, tc := range []struct {
		name       string
		on         bool
		own, chain []byte
		p          llm.Provider
		caps       llm.Capabilities
		want       []byte
		problem    string
		err        error
	}{
		{"off", false, own, nil, provider{}, llm.CapAll, nil, "", nil},
		{"own", true, own, chainwide, provider{}, llm.CapAll, own, "", nil},
		{"the chain's", true, nil, chainwide, provider{}, llm.CapAll, chainwide, "", nil},
		{"none", true, nil, nil, provider{}, llm.CapAll, nil, "NativeSchema is set but neither the target nor the chain has a Schema; set one, or unset NativeSchema", nil},
		{"no provider", true, own, nil, nil, llm.CapAll, nil, "", nil},
		{"cannot", true, own, nil, provider{}, llm.CapTools, nil,
			`NativeSchema is set but provider "p" cannot enforce a schema natively (its capabilities: tools); unset NativeSchema, the chain validates the answer all the same`, nil},
		{"checker refuses", true, own, nil, provider{refuse: refused}, llm.CapAll, nil,
			"NativeSchema is set but the provider cannot take the Schema natively; change the schema as the error says, or unset NativeSchema", refused},
	} {
		got, problem, err := capability.Native(tc.on, tc.own, tc.chain, tc.p, tc.caps)
		if string(got) != string(tc.want) || problem != tc.problem || err != tc.err {
			t.Errorf("%s: %s, %q, %v; want %s, %q, %v", tc.name, got, problem, err, tc.want, tc.problem, tc.err)
		}
	}
}

func TestWarnings(t *testing.T) {
	got := capability.Warnings([]capability.Named{
		{Name: "sees", Tier: "primary", Caps: llm.CapAll},
		{Name: "blind", Tier: "provider", Caps: llm.CapAll &^ (llm.CapImages | llm.CapTools)},
		{Name: "last", Tier: "provider", Caps: llm.CapAll},
	})
	want := []string{
		`target "blind" (provider) cannot carry tools, which "sees" takes: a request that carries them skips it`,
		`target "blind" (provider) cannot carry images, which "sees" takes: a request that carries them skips it`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Warnings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

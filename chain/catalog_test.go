package chain_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
)

func tooLong(context.Context) (*llm.Response, error) {
	return nil, &llm.Error{Provider: "stub", Status: 400, Kind: llm.KindContextLength, Message: "prompt is too long"}
}

// A context-length failure on a catalogued 200k model moves on to a
// catalogued 1M model, past a catalogued model of the same 200k window,
// with no ContextWindow set anywhere.
func TestContextLengthMovesToACataloguedLargerModel(t *testing.T) {
	sonnet := &scripted{name: "anthropic", script: []func(context.Context) (*llm.Response, error){tooLong}}
	haiku := &scripted{name: "anthropic", script: []func(context.Context) (*llm.Response, error){answers}}
	big := &scripted{name: "bedrock", script: []func(context.Context) (*llm.Response, error){answers}}
	c, err := chain.New("c").
		Primary(chain.Target{Name: "sonnet-4-5", Provider: sonnet, Model: "claude-sonnet-4-5-20250929"}).
		OrSibling(chain.Target{Name: "haiku", Provider: haiku, Model: "claude-haiku-4-5"}).
		OrProvider(chain.Target{Name: "sonnet-5", Provider: big, Model: "us.anthropic.claude-sonnet-5"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(t.Context(), question)
	if err != nil {
		t.Fatalf("a 1M model was left untried after a 200k model's context-length failure: %v", err)
	}
	if res.Served.Target != "sonnet-5" || big.n.Load() != 1 || haiku.n.Load() != 0 || sonnet.n.Load() != 1 {
		t.Errorf("served by %q; requests: sonnet-4-5 %d, haiku %d, sonnet-5 %d; want sonnet-5 once, haiku (200k) skipped",
			res.Served.Target, sonnet.n.Load(), haiku.n.Load(), big.n.Load())
	}
	if a := res.Attempts[1]; a.Target != "haiku" || !errors.Is(a.Err, chain.ErrContextWindow) || !strings.Contains(a.Reason, "200000 not larger than 200000") {
		t.Errorf("haiku's attempt = %+v; want a context-window skip", a)
	}
}

// The target's own ContextWindow overrides the catalogue's; Serves names
// the model a deployment of your own serves.
func TestTargetContextWindowOverridesTheCatalogue(t *testing.T) {
	primary := func() *scripted {
		return &scripted{name: "anthropic", script: []func(context.Context) (*llm.Response, error){tooLong}}
	}
	ok := func() *scripted {
		return &scripted{name: "azure", script: []func(context.Context) (*llm.Response, error){answers}}
	}
	// gpt-4.1's catalogued window (1,047,576) is larger than Sonnet 5's
	// (1M); the target says its deployment takes 500k.
	small := ok()
	c, err := chain.New("c").
		Primary(chain.Target{Name: "sonnet-5", Provider: primary(), Model: "claude-sonnet-5"}).
		OrProvider(chain.Target{Name: "gpt", Provider: small, Model: "gpt-4.1", ContextWindow: 500_000}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(t.Context(), question); err == nil || small.n.Load() != 0 {
		t.Errorf("a target whose own ContextWindow (500k) is smaller was tried (%d requests, err %v)", small.n.Load(), err)
	}
	named := ok()
	c, err = chain.New("c").
		Primary(chain.Target{Name: "sonnet-5", Provider: primary(), Model: "claude-sonnet-5"}).
		OrProvider(chain.Target{Name: "gpt", Provider: named, Model: "my-gpt-eu", Serves: "gpt-4.1-2025-04-14"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if res, err := c.Call(t.Context(), question); err != nil || res.Served.Target != "gpt" {
		t.Errorf("a deployment serving gpt-4.1 did not take the catalogue's window: %v", err)
	}
}

// Builder.Catalog replaces the catalogue: an empty one knows no window, and
// the error then says what to change; an extended one knows a model of
// your own.
func TestBuilderCatalog(t *testing.T) {
	build := func(cat *catalog.Catalog, model string) (*chain.Chain, *scripted) {
		t.Helper()
		fb := &scripted{name: "other", script: []func(context.Context) (*llm.Response, error){answers}}
		c, err := chain.New("c").Catalog(cat).
			Primary(chain.Target{Name: "haiku", Provider: &scripted{name: "anthropic", script: []func(context.Context) (*llm.Response, error){tooLong}}, Model: "claude-haiku-4-5"}).
			OrProvider(chain.Target{Name: "fb", Provider: fb, Model: model}).Build()
		if err != nil {
			t.Fatal(err)
		}
		return c, fb
	}
	empty, err := catalog.New()
	if err != nil {
		t.Fatal(err)
	}
	c, fb := build(empty, "claude-sonnet-5")
	_, err = c.Call(t.Context(), question)
	if err == nil || fb.n.Load() != 0 {
		t.Fatalf("with an empty catalogue the fallback was tried (err %v)", err)
	}
	if !errors.Is(err, chain.ErrContextWindow) || !strings.Contains(err.Error(), "ContextWindow") || !strings.Contains(err.Error(), "Builder.Catalog") {
		t.Errorf("the error does not say what to change: %v", err)
	}
	mine, err := catalog.Default().With(catalog.Model{ID: "in-house-2m", ContextWindow: 2_000_000})
	if err != nil {
		t.Fatal(err)
	}
	c, fb = build(mine, "in-house-2m")
	if res, err := c.Call(t.Context(), question); err != nil || res.Served.Target != "fb" || fb.n.Load() != 1 {
		t.Errorf("a model added with Catalog.With was not tried: %v", err)
	}
}

// What the catalogue says a model lacks is added to the target's Lacks (a
// request with an image skips gpt-4, text-only), unless the target's
// Takes says it takes it; what the provider declares still holds.
func TestCatalogueLacksSkipsTarget(t *testing.T) {
	img := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is this?", Parts: []llm.Part{llm.ImagePart("image/png", []byte("\x89PNG"))}}}}
	run := func(takes llm.Capabilities) (*scripted, *scripted, *chain.Result) {
		t.Helper()
		old := &scripted{name: "openai", script: []func(context.Context) (*llm.Response, error){answers}}
		fb := &scripted{name: "google", script: []func(context.Context) (*llm.Response, error){answers}}
		c, err := chain.New("c").
			Primary(chain.Target{Name: "gpt-4", Provider: old, Model: "gpt-4-0613", Takes: takes}).
			OrProvider(chain.Target{Name: "gemini", Provider: fb, Model: "gemini-2.5-pro"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), img)
		if err != nil {
			t.Fatal(err)
		}
		return old, fb, res
	}
	old, fb, res := run(0)
	if old.n.Load() != 0 || fb.n.Load() != 1 || !errors.Is(res.Attempts[0].Err, chain.ErrCapability) {
		t.Errorf("an image went to gpt-4 (text only): gpt-4 %d, gemini %d requests; attempts %+v", old.n.Load(), fb.n.Load(), res.Attempts)
	}
	old, fb, _ = run(llm.CapImages)
	if old.n.Load() != 1 || fb.n.Load() != 0 {
		t.Errorf("Takes: CapImages did not override the catalogue: gpt-4 %d, gemini %d requests", old.n.Load(), fb.n.Load())
	}
	// A provider that declares no images keeps them off whatever Takes says.
	rec := capable{&recorder{name: "p", caps: llm.CapTools}}
	c, err := chain.New("c").Primary(chain.Target{Name: "gpt-4", Provider: rec, Model: "gpt-4", Takes: llm.CapAll}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(t.Context(), img); err == nil || len(rec.reqs) != 0 {
		t.Errorf("Takes added a capability the provider lacks: %d requests, err %v", len(rec.reqs), err)
	}
}

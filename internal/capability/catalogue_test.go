package capability_test

import (
	"context"
	"testing"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/internal/capability"
	"github.com/backstop-llm/backstop/llm"
)

// TestCatalogue: a known model fills a window and a price left 0 and adds
// what it lacks, less what the target takes; a window or price set, and a
// model the catalogue does not know, are left as they are.
func TestCatalogue(t *testing.T) {
	cat, err := catalog.New(catalog.Model{ID: "m-1", Family: "anthropic", ContextWindow: 1000, Price: catalog.Price{Input: 1, Output: 2}, Lacks: llm.CapImages | llm.CapTools, Source: "test", AsOf: "2026-01-01"})
	if err != nil {
		t.Fatal(err)
	}
	window, lacks, price := 0, llm.Capabilities(0), catalog.Price{}
	m := capability.Catalogue(cat, "m-1", "", llm.CapTools, &window, &price, &lacks)
	if window != 1000 || lacks != llm.CapImages || price != (catalog.Price{Input: 1, Output: 2}) || m.ID != "m-1" {
		t.Errorf("known model: window %d, lacks %v, price %+v, entry %q; want 1000, %v, its price, m-1", window, lacks, price, m.ID, llm.CapImages)
	}
	price = catalog.Price{Input: 9}
	capability.Catalogue(cat, "m-1", "", 0, &window, &price, &lacks)
	if price != (catalog.Price{Input: 9}) {
		t.Errorf("a price set is replaced: %+v", price)
	}
	window, lacks = 50, 0
	capability.Catalogue(cat, "m-1", "", 0, &window, &price, &lacks)
	if window != 50 || lacks != llm.CapImages|llm.CapTools {
		t.Errorf("window set: window %d, lacks %v; want 50, %v", window, lacks, llm.CapImages|llm.CapTools)
	}
	window, lacks, price = 0, 0, catalog.Price{}
	if m := capability.Catalogue(cat, "unknown", "", 0, &window, &price, &lacks); m.ID != "" || price != (catalog.Price{}) {
		t.Errorf("unknown model: entry %q, price %+v; want none", m.ID, price)
	}
	if window != 0 || lacks != 0 {
		t.Errorf("unknown model: window %d, lacks %v; want both left 0", window, lacks)
	}
}

// plain is a provider that declares nothing: it carries everything.
type plain struct{}

func (plain) Name() string                                                 { return "plain" }
func (plain) Complete(context.Context, llm.Request) (*llm.Response, error) { return nil, nil }

// TestCarried: a provider's capabilities less what the target lacks; a
// nil provider (reported already) carries everything.
func TestCarried(t *testing.T) {
	if caps, media := capability.Carried(nil, llm.CapTools); caps != llm.CapAll || !capability.Unlimited(media) {
		t.Errorf("Carried(nil) = %v, %v; want CapAll and no media types", caps, media)
	}
	if caps, _ := capability.Carried(plain{}, llm.CapTools); caps != llm.CapAll&^llm.CapTools {
		t.Errorf("Carried(plain, CapTools) = %v; want %v", caps, llm.CapAll&^llm.CapTools)
	}
}

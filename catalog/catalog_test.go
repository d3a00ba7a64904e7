package catalog_test

import (
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/llm"
)

// The embedded file parses, is dated and sourced, holds the models the
// docs name, and every id it lists finds its own entry.
func TestEmbeddedIsValidAndComplete(t *testing.T) {
	c := catalog.Default()
	for _, m := range c.Models() {
		if m.AsOf == "" {
			t.Fatalf("%s has no as_of date", m.ID)
		}
	}
	for _, id := range []string{"claude-opus-5", "claude-sonnet-5", "claude-haiku-4-5", "claude-sonnet-4-5",
		"gpt-5", "gpt-5-mini", "gpt-4.1", "gpt-4o", "gpt-4o-mini", "gemini-2.5-pro"} {
		if m, ok := c.Lookup(id); !ok || m.ContextWindow == 0 {
			t.Errorf("Lookup(%q) = %+v, %v; want an entry with its context window", id, m, ok)
		}
	}
	for _, m := range c.Models() {
		if m.Family == "" || !strings.HasPrefix(m.Source, "https://") || m.AsOf == "" {
			t.Errorf("model %q: family %q, source %q, as of %q; every entry needs all three", m.ID, m.Family, m.Source, m.AsOf)
		}
		if m.ContextWindow == 0 && m.Price == (catalog.Price{}) {
			t.Errorf("model %q has neither a context window nor a price", m.ID)
		}
		for _, id := range append([]string{m.ID}, m.Aliases...) {
			if got, ok := c.Lookup(id); !ok || got.ID != m.ID {
				t.Errorf("Lookup(%q) = %q, %v; want %q", id, got.ID, ok, m.ID)
			}
		}
	}
	if m, _ := c.Lookup("claude-opus-5"); m.Price != (catalog.Price{Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25}) {
		t.Errorf("claude-opus-5 price = %+v", m.Price)
	}
	if m, _ := c.Lookup("gpt-4"); m.Capabilities()&llm.CapImages != 0 || m.Capabilities()&llm.CapTools == 0 {
		t.Errorf("gpt-4 capabilities = %s; want no images, tools kept", m.Capabilities())
	}
}

// Every platform's form of an id finds its model, by the rule chain's
// tiers use; names are never matched by prefix.
func TestLookupIdentity(t *testing.T) {
	c := catalog.Default()
	for id, want := range map[string]string{
		"claude-haiku-4-5-20251001":                      "claude-haiku-4-5-20251001",
		"claude-haiku-4-5":                               "claude-haiku-4-5-20251001",
		"anthropic.claude-haiku-4-5-20251001-v1:0":       "claude-haiku-4-5-20251001",
		"us.anthropic.claude-haiku-4-5-20251001-v1:0":    "claude-haiku-4-5-20251001",
		"eu.anthropic.claude-sonnet-4-5-20250929-v1:0":   "claude-sonnet-4-5-20250929",
		"apac.anthropic.claude-sonnet-4-5-20250929-v1:0": "claude-sonnet-4-5-20250929",
		"arn:aws:bedrock:eu-west-1:1:inference-profile/eu.anthropic.claude-sonnet-4-5-20250929-v1:0": "claude-sonnet-4-5-20250929",
		"claude-sonnet-4-5@20250929":                "claude-sonnet-4-5-20250929",
		"publishers/anthropic/models/claude-opus-5": "claude-opus-5",
		"global.anthropic.claude-opus-5":            "claude-opus-5",
		"anthropic.claude-opus-4-6-v1":              "claude-opus-4-6",
		"CLAUDE-OPUS-5":                             "claude-opus-5",
		"gpt-4o-2024-08-06":                         "gpt-4o",
		"gpt-4o-mini-2024-07-18":                    "gpt-4o-mini",
		"gpt-5-2025-08-07":                          "gpt-5",
		"gpt-4-0613":                                "gpt-4",
		"models/gemini-2.5-pro":                     "gemini-2.5-pro",
		"gemini-2.0-flash-001":                      "gemini-2.0-flash",
	} {
		if m, ok := c.Lookup(id); !ok || m.ID != want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", id, m.ID, ok, want)
		}
	}
	only, err := catalog.New(catalog.Model{ID: "gpt-4o", ContextWindow: 128000}, catalog.Model{ID: "claude-sonnet-4-5", ContextWindow: 200000})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"gpt-4o-mini", "gpt-4", "claude-sonnet-4", "claude-sonnet-4-6", "my-gpt-4o-deployment", "", "  "} {
		if m, ok := only.Lookup(id); ok {
			t.Errorf("Lookup(%q) = %q; want no entry (not the same model)", id, m.ID)
		}
	}
	var none *catalog.Catalog
	if _, ok := none.Lookup("gpt-4o"); ok || none.Models() != nil {
		t.Error("a nil catalogue knows a model")
	}
}

// A dated id takes its snapshot's entry, else its model's alias entry; an
// alias takes its own entry, else the first of its model.
func TestLookupSnapshots(t *testing.T) {
	c, err := catalog.New(
		catalog.Model{ID: "gpt-4o-2024-05-13", ContextWindow: 1},
		catalog.Model{ID: "gpt-4o", ContextWindow: 2},
	)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{"gpt-4o-2024-05-13": 1, "gpt-4o-2024-08-06": 2, "gpt-4o": 2} {
		if m, _ := c.Lookup(id); m.ContextWindow != want {
			t.Errorf("Lookup(%q).ContextWindow = %d; want %d", id, m.ContextWindow, want)
		}
	}
}

// With replaces the entries a model shares an id with, adds the others,
// and leaves the catalogue it was called on unchanged.
func TestWithReplacesAndAdds(t *testing.T) {
	base := catalog.Default()
	c, err := base.With(
		catalog.Model{ID: "claude-haiku-4-5", ContextWindow: 300000},
		catalog.Model{ID: "my-model", ContextWindow: 32000},
	)
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := c.Lookup("anthropic.claude-haiku-4-5-20251001-v1:0"); m.ContextWindow != 300000 {
		t.Errorf("replaced haiku window = %d; want 300000", m.ContextWindow)
	}
	if m, _ := c.Lookup("my-model"); m.ContextWindow != 32000 {
		t.Errorf("added model window = %d; want 32000", m.ContextWindow)
	}
	if m, _ := base.Lookup("claude-haiku-4-5"); m.ContextWindow != 200000 {
		t.Errorf("Default changed: haiku window %d", m.ContextWindow)
	}
	if _, ok := base.Lookup("my-model"); ok {
		t.Error("Default changed: it knows my-model")
	}
	if len(c.Models()) != len(base.Models())+1 {
		t.Errorf("With: %d models; want %d", len(c.Models()), len(base.Models())+1)
	}
	if _, err := base.With(catalog.Model{ID: "x", ContextWindow: -1}); err == nil {
		t.Error("With took a negative window")
	}
}

func TestNewRejects(t *testing.T) {
	for name, models := range map[string][]catalog.Model{
		"one id, two models": {{ID: "gpt-4o"}, {ID: "other", Aliases: []string{"gpt-4o"}}},
		"one snapshot, two":  {{ID: "claude-haiku-4-5-20251001"}, {ID: "claude-haiku-4-5@20251001"}},
		"no id":              {{ContextWindow: 5}},
		"empty alias":        {{ID: "m", Aliases: []string{""}}},
		"negative window":    {{ID: "m", ContextWindow: -1}},
		"negative price":     {{ID: "m", Price: catalog.Price{Output: -1}}},
		"not a capability":   {{ID: "m", Lacks: 1 << 7}},
	} {
		if _, err := catalog.New(models...); err == nil {
			t.Errorf("%s: New accepted %+v", name, models)
		}
	}
}

func TestParseRejects(t *testing.T) {
	good := `{"as_of":"2026-12-04","families":[{"family":"f","source":"https://example.com","models":[{"id":"m","context_window":5,"lacks":["images"]}]}]}`
	c, err := catalog.Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := c.Lookup("m"); m.Lacks != llm.CapImages || m.AsOf != "2026-12-04" || m.Family != "f" {
		t.Errorf("parsed %+v", m)
	}
	for name, bad := range map[string]string{
		"unknown field":   strings.Replace(good, `"context_window"`, `"context"`, 1),
		"no date":         strings.Replace(good, `"2026-12-04"`, `"December"`, 1),
		"no source":       strings.Replace(good, `https://example.com`, `example.com`, 1),
		"bad capability":  strings.Replace(good, `"images"`, `"vision"`, 1),
		"trailing data":   good + `{}`,
		"not json":        `{`,
		"negative window": strings.Replace(good, `:5`, `:-5`, 1),
	} {
		if _, err := catalog.Parse([]byte(bad)); err == nil {
			t.Errorf("%s: Parse accepted %s", name, bad)
		}
	}
}

// Parse never panics, and a catalogue it accepts finds every entry by each
// of its ids.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"as_of":"2026-12-04","families":[{"family":"f","source":"https://x","models":[{"id":"gpt-4o","aliases":["gpt-4o-2024-08-06"],"lacks":["tools"]}]}]}`))
	f.Add([]byte(`{"as_of":"2026-12-04","families":[{"family":"a","source":"https://x","models":[{"id":"claude-haiku-4-5@20251001"},{"id":"eu.anthropic.claude-haiku-4-5-20251001-v1:0"}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := catalog.Parse(data)
		if err != nil {
			return
		}
		for _, m := range c.Models() {
			if got, ok := c.Lookup(m.ID); strings.TrimSpace(m.ID) != "" && (!ok || got.ID != m.ID) {
				t.Fatalf("Lookup(%q) = %q, %v", m.ID, got.ID, ok)
			}
		}
	})
}

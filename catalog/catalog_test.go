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
	f.Add([]byte(`{"as_of":"2026-12-04","families":[{"family":"a","source":"https://x","prices":"https://p","prices_on":{"batch":"https://b"},"models":[{"id":"m","price":{"input":3,"output":15},"prices_on":{"batch":{"times":0.5}}}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := catalog.Parse(data)
		if err != nil {
			return
		}
		for _, m := range c.Models() {
			if got, ok := c.Lookup(m.ID); strings.TrimSpace(m.ID) != "" && (!ok || got.ID != m.ID) {
				t.Fatalf("Lookup(%q) = %q, %v", m.ID, got.ID, ok)
			}
			for on, p := range m.Prices {
				if p.Input < 0 || p.Output < 0 || p.CacheRead < 0 || p.CacheWrite < 0 || m.PriceFor(on) != p {
					t.Fatalf("%s on %q: price %+v accepted", m.ID, on, p)
				}
			}
		}
	})
}

// A model's price where it is served at another price: the catalogue's
// figures, its standard price where it names none, and an unknown figure
// kept unknown.
func TestPriceFor(t *testing.T) {
	c := catalog.Default()
	opus, _ := c.Lookup("claude-opus-5")
	for on, want := range map[string]catalog.Price{
		"":                 {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
		"bedrock-regional": {Input: 5.5, Output: 27.5, CacheRead: 0.55, CacheWrite: 6.875},
		"vertex-regional":  {Input: 5.5, Output: 27.5, CacheRead: 0.55, CacheWrite: 6.875},
		"us-only":          {Input: 5.5, Output: 27.5, CacheRead: 0.55, CacheWrite: 6.875},
		"batch":            {Input: 2.5, Output: 12.5, CacheRead: 0.25, CacheWrite: 3.125},
		"priority":         {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25}, // none: the standard price
		"no-such-name":     {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	} {
		if got := opus.PriceFor(on); got != want {
			t.Errorf("claude-opus-5 on %q: %+v; want %+v", on, got, want)
		}
	}
	if m, _ := c.Lookup("claude-sonnet-5-5"); m.PriceFor("bedrock-regional") != (catalog.Price{Input: 2.2, Output: 11, CacheWrite: 2.75}) {
		t.Errorf("claude-sonnet-5-5 regional %+v; want its unknown cache read kept unknown", m.PriceFor("bedrock-regional"))
	}
	if m, _ := c.Lookup("claude-haiku-4-5"); m.PriceFor("us-only") != m.Price || m.PriceFor("vertex-regional") == m.Price {
		t.Errorf("claude-haiku-4-5: us-only %+v (no US-only price before 4.6), regional %+v", m.PriceFor("us-only"), m.PriceFor("vertex-regional"))
	}
	if m, _ := c.Lookup("claude-opus-4-1"); m.Prices != nil {
		t.Errorf("claude-opus-4-1 has prices %+v; older models keep their pricing everywhere", m.Prices)
	}
	if m, _ := c.Lookup("gpt-5-2025-08-07"); m.PriceFor("priority") != (catalog.Price{Input: 2.5, Output: 20, CacheRead: 0.25}) {
		t.Errorf("gpt-5 priority %+v", m.PriceFor("priority"))
	}
	// Every premium and discount is what its source says of the standard
	// price, field by field.
	for _, m := range c.Models() {
		for on, p := range m.Prices {
			x := map[string]float64{"bedrock-regional": 1.1, "vertex-regional": 1.1, "us-only": 1.1, "batch": 0.5}[on]
			if x == 0 {
				continue
			}
			for _, f := range [][2]float64{{p.Input, m.Price.Input}, {p.Output, m.Price.Output}, {p.CacheRead, m.Price.CacheRead}, {p.CacheWrite, m.Price.CacheWrite}} {
				if d := f[0] - f[1]*x; d > 1e-9 || d < -1e-9 {
					t.Errorf("%s on %s: %+v is not %v times %+v", m.ID, on, p, x, m.Price)
				}
			}
		}
	}
	// What Lookup returns is a copy.
	opus.Prices["batch"] = catalog.Price{}
	if again, _ := c.Lookup("claude-opus-5"); again.PriceFor("batch").Input != 2.5 {
		t.Error("changing a looked-up model's Prices changed the catalogue")
	}
}

func TestPricesRejected(t *testing.T) {
	for name, m := range map[string]catalog.Model{
		"unknown name":   {ID: "m", Prices: map[string]catalog.Price{"regional": {Input: 1}}},
		"negative price": {ID: "m", Prices: map[string]catalog.Price{"batch": {Output: -1}}},
	} {
		if _, err := catalog.New(m); err == nil {
			t.Errorf("%s: New accepted %+v", name, m)
		}
	}
	good := `{"as_of":"2026-12-04","families":[{"family":"f","source":"https://example.com","prices_on":{"batch":"https://example.com/batch: half"},` +
		`"models":[{"id":"m","price":{"input":2,"output":4},"prices_on":{"batch":{"times":0.5}}}]}]}`
	c, err := catalog.Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if m, _ := c.Lookup("m"); m.PriceFor("batch") != (catalog.Price{Input: 1, Output: 2}) {
		t.Errorf("times 0.5 of {2 4}: %+v", m.PriceFor("batch"))
	}
	for name, bad := range map[string]string{
		"unknown name":         strings.Replace(good, `"prices_on":{"batch":{`, `"prices_on":{"batchy":{`, 1),
		"unknown family name":  strings.Replace(good, `"prices_on":{"batch":"`, `"prices_on":{"batchy":"`, 1),
		"no source":            strings.Replace(good, `"prices_on":{"batch":"https://example.com/batch: half"},`, ``, 1),
		"source not a URL":     strings.Replace(good, `https://example.com/batch`, `the batch page`, 1),
		"negative figure":      strings.Replace(good, `{"times":0.5}`, `{"input":-1}`, 1),
		"negative times":       strings.Replace(good, `{"times":0.5}`, `{"times":-0.5}`, 1),
		"times and figures":    strings.Replace(good, `{"times":0.5}`, `{"times":0.5,"input":1}`, 1),
		"times of no price":    strings.Replace(good, `"price":{"input":2,"output":4},`, ``, 1),
		"misspelt price field": strings.Replace(good, `{"times":0.5}`, `{"imput":1}`, 1),
	} {
		if _, err := catalog.Parse([]byte(bad)); err == nil {
			t.Errorf("%s: Parse accepted %s", name, bad)
		}
	}
}

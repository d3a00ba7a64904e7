// Package catalog is backstop's catalogue of the models it recognizes: for
// each, its provider family, the ids it goes by on every platform, its
// context window, its maximum output, the capabilities it lacks and its
// prices. It owns that data and the rule that finds a model's entry from
// any id a target may name it by.
//
// The data is models.json, embedded at build time: a dated file, with the
// page each family's figures were read from, that anyone can update
// without touching Go code (docs/concepts.md, "The model catalogue", says
// how). A figure the sources did not give is left out, and reads as 0:
// unknown.
//
// A chain reads it at Build (chain.Builder.Catalog): a target whose
// ContextWindow is 0 takes its model's window from here, so that after a
// context-length failure the chain moves on to a model with a larger one
// without configuration; and what the catalogue says a model lacks is
// added to the target's Lacks, so that a request it cannot take skips it.
//
// Lookup matches ids as chain matches them across tiers: a dated snapshot
// is its model (claude-haiku-4-5-20251001, gpt-4o-2024-08-06), an alias
// without a date any snapshot of its model, and Bedrock
// (anthropic.<id>-v1:0, with or without a us., eu., apac., global. …
// inference profile prefix, or the ARN of one), Vertex (<id>@<date>,
// publishers/…/models/<id>) and Gemini (models/<id>) forms name the model
// they wrap. A name is never matched by prefix: gpt-4o-mini is not gpt-4o.
// An Azure deployment has a name of your own; give the model it serves as
// the target's Serves.
package catalog

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/internal/modelid"
	"github.com/backstop-llm/backstop/llm"
)

//go:embed models.json
var embedded []byte

// Price is what a model costs, in US dollars per million tokens. A field
// that is 0 is unknown, not free.
type Price struct {
	// Input is the price of input tokens not read from a cache.
	Input float64 `json:"input,omitempty"`
	// Output is the price of output tokens, reasoning included.
	Output float64 `json:"output,omitempty"`
	// CacheRead is the price of input tokens read from a prompt cache
	// (Anthropic's cache hits, OpenAI's cached input).
	CacheRead float64 `json:"cache_read,omitempty"`
	// CacheWrite is the price of input tokens written to a prompt cache
	// (Anthropic's 5-minute cache writes).
	CacheWrite float64 `json:"cache_write,omitempty"`
}

// Model is one model's entry. Zero fields are unknown.
type Model struct {
	// ID is the model's id on its vendor's own API.
	ID string
	// Family is its provider family: "anthropic", "openai", "google".
	Family string
	// Aliases are other ids of the model that the identity rule (see the
	// package doc) does not already reduce to ID: dated snapshots,
	// platform ids.
	Aliases []string
	// ContextWindow is the most tokens a request may hold, in tokens.
	ContextWindow int
	// MaxOutput is the most tokens an answer may hold.
	MaxOutput int
	// Lacks is what the model is known not to take. Only what the sources
	// say it lacks is here: a capability not listed may still be missing.
	Lacks llm.Capabilities
	// Price is what it costs on its vendor's own API, at the standard
	// service tier.
	Price Price
	// Prices are what it costs where it is served at another price; nil
	// when the sources give no other. They are keyed by these names:
	//
	//   - "batch": the vendor's batch API (Anthropic Message Batches,
	//     OpenAI Batch).
	//   - "flex", "priority": OpenAI's service_tier "flex" and "priority".
	//   - "us-only": Anthropic's API with inference_geo "us".
	//   - "bedrock-regional": Amazon Bedrock on a regional endpoint (an
	//     in-region model id or a geographic inference profile: us., eu.,
	//     jp., au., apac.), not the global one.
	//   - "vertex-regional": Google Vertex AI on a regional or
	//     multi-region endpoint, not the global one.
	//
	// An entry is whole: a field it leaves 0 is unknown there, not the
	// standard price. Read it through PriceFor.
	Prices map[string]Price
	// Note says what the figures leave out (a price tier, a limit on
	// input), or the page they were read from when it is not the family's.
	Note string
	// Source is the page the family's figures were read from, AsOf the
	// day they were read (YYYY-MM-DD).
	Source, AsOf string
}

// priceNames are the names Model.Prices is keyed by (its doc says what
// each means).
var priceNames = []string{"batch", "flex", "priority", "us-only", "bedrock-regional", "vertex-regional"}

// PriceFor returns what the model costs where it is served: its entry in
// Prices named on (one of the names Prices lists), or Price when on is ""
// or the model has no such entry: on its vendor's own API at the standard
// tier, on a global endpoint, and wherever the sources name no other
// price. A target's own price (chain.Target.Price) overrides both.
func (m Model) PriceFor(on string) Price {
	if p, ok := m.Prices[on]; ok {
		return p
	}
	return m.Price
}

// Capabilities is what the model takes, as far as the catalogue knows:
// everything it is not known to lack.
func (m Model) Capabilities() llm.Capabilities { return llm.CapAll &^ m.Lacks }

// Catalog is a set of models, looked up by any of their ids. It is
// immutable and safe for concurrent use. A nil *Catalog knows no model.
type Catalog struct {
	models []Model
	index  map[string][]ref // by family, as modelid.Canonical reduces ids
}

// ref is one identity of a model: the snapshot date an id names ("" for
// an alias) and the model's position.
type ref struct {
	date  string
	model int
}

var defaultCatalog = sync.OnceValue(func() *Catalog {
	c, err := Parse(embedded)
	if err != nil {
		panic("catalog: the embedded models.json is invalid: " + err.Error())
	}
	return c
})

// Default returns the catalogue embedded in backstop (models.json), parsed
// once on first use.
func Default() *Catalog { return defaultCatalog() }

// New returns a catalogue of models, or an error naming every entry that
// is invalid or that claims an id another entry claims.
func New(models ...Model) (*Catalog, error) {
	c := &Catalog{}
	var errs []string
	for _, m := range models {
		errs = append(errs, c.add(m)...)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("catalog: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// With returns a copy of c in which each of models replaces the entries
// it shares an id with (its ID or an alias, by the identity rule), or is
// added. Use it to correct a figure, or to add a model the catalogue does
// not know: catalog.Default().With(catalog.Model{ID: "my-model",
// ContextWindow: 32000}). c is unchanged.
func (c *Catalog) With(models ...Model) (*Catalog, error) {
	add, err := New(models...)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return add, nil
	}
	out := &Catalog{}
	for _, m := range models {
		out.add(m)
	}
	for _, m := range c.models {
		if !slices.ContainsFunc(ids(m), func(id string) bool { return add.claims(id) }) {
			out.add(m)
		}
	}
	return out, nil
}

// Lookup returns the entry of the model id names, in any of the forms the
// package doc lists; ok is false when the catalogue does not know it. A
// dated id takes the entry of its snapshot, or else of its model's alias;
// an alias takes its own entry, or else its model's first.
func (c *Catalog) Lookup(id string) (m Model, ok bool) {
	if c == nil || strings.TrimSpace(id) == "" {
		return Model{}, false
	}
	family, date, _ := modelid.Canonical(id)
	refs := c.index[family]
	exact, alias := -1, -1
	for _, r := range refs {
		if r.date == date {
			exact = r.model
			break
		}
		if r.date == "" && alias < 0 {
			alias = r.model
		}
	}
	best := exact
	if best < 0 {
		best = alias
	}
	if best < 0 && date == "" && len(refs) > 0 {
		best = refs[0].model // an alias names any snapshot
	}
	if best < 0 {
		return Model{}, false
	}
	return c.models[best].clone(), true
}

// Models returns every entry, in the catalogue's order.
func (c *Catalog) Models() []Model {
	if c == nil {
		return nil
	}
	out := make([]Model, len(c.models))
	for i, m := range c.models {
		out[i] = m.clone()
	}
	return out
}

// claims reports whether an entry of c has an identity id also has.
func (c *Catalog) claims(id string) bool {
	family, date, _ := modelid.Canonical(id)
	return slices.ContainsFunc(c.index[family], func(r ref) bool { return r.date == date })
}

// clone is m sharing no slice or map with the catalogue's entry.
func (m Model) clone() Model {
	m.Aliases = slices.Clone(m.Aliases)
	m.Prices = maps.Clone(m.Prices)
	return m
}

// ids are the ids m goes by: its ID, then its aliases.
func ids(m Model) []string { return append([]string{m.ID}, m.Aliases...) }

// add checks m and indexes it under each of its identities, returning its
// problems (m is not added when there are any).
func (c *Catalog) add(m Model) []string {
	var errs []string
	name := fmt.Sprintf("model %q", m.ID)
	if strings.TrimSpace(m.ID) == "" {
		errs = append(errs, "a model has no id")
		name = "a model without an id"
	}
	if m.ContextWindow < 0 || m.MaxOutput < 0 {
		errs = append(errs, fmt.Sprintf("%s: context window %d and max output %d must not be negative (0 means unknown)", name, m.ContextWindow, m.MaxOutput))
	}
	errs = append(errs, m.Price.problems(name, "")...)
	for _, on := range slices.Sorted(maps.Keys(m.Prices)) {
		if !slices.Contains(priceNames, on) {
			errs = append(errs, fmt.Sprintf("%s: price %q is no price name; use one of %s", name, on, quoted(priceNames)))
			continue
		}
		errs = append(errs, m.Prices[on].problems(name, on)...)
	}
	if m.Lacks&^llm.CapAll != 0 {
		errs = append(errs, fmt.Sprintf("%s: Lacks holds bits that are no capability (%#x)", name, uint8(m.Lacks&^llm.CapAll)))
	}
	seen := map[string]bool{} // family and date
	type identity struct {
		family string
		r      ref
	}
	var own []identity
	for _, id := range ids(m) {
		if strings.TrimSpace(id) == "" {
			if id != m.ID {
				errs = append(errs, fmt.Sprintf("%s: an alias is empty", name))
			}
			continue
		}
		family, date, _ := modelid.Canonical(id)
		r := ref{date: date, model: len(c.models)}
		if seen[family+"\x00"+date] {
			continue // one model may list an id the rule already reduces
		}
		seen[family+"\x00"+date] = true
		for _, o := range c.index[family] {
			if o.date == date {
				errs = append(errs, fmt.Sprintf("%s: id %q names model %q too; remove one, or use Catalog.With to replace an entry", name, id, c.models[o.model].ID))
			}
		}
		own = append(own, identity{family, r})
	}
	if len(errs) > 0 {
		return errs
	}
	if c.index == nil {
		c.index = map[string][]ref{}
	}
	for _, o := range own {
		c.index[o.family] = append(c.index[o.family], o.r)
	}
	m.Aliases = slices.Clone(m.Aliases)
	c.models = append(c.models, m)
	return nil
}

// problems are p's invalid fields, for the model called name (its price
// on on, when on is not "").
func (p Price) problems(name, on string) []string {
	where := ""
	if on != "" {
		where = fmt.Sprintf(" on %q", on)
	}
	var errs []string
	for _, f := range []struct {
		what string
		v    float64
	}{{"input", p.Input}, {"output", p.Output}, {"cache read", p.CacheRead}, {"cache write", p.CacheWrite}} {
		if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Sprintf("%s: %s price%s %v must be a non-negative number (0 means unknown)", name, f.what, where, f.v))
		}
	}
	return errs
}

// times is p with every known field multiplied by x, rounded to a
// billionth of a dollar per million tokens; an unknown field stays unknown.
func (p Price) times(x float64) Price {
	mul := func(v float64) float64 { return math.Round(v*x*1e9) / 1e9 }
	return Price{Input: mul(p.Input), Output: mul(p.Output), CacheRead: mul(p.CacheRead), CacheWrite: mul(p.CacheWrite)}
}

// priceOn is a price in models.json's "prices_on": the figures, or "times",
// a multiple of the model's standard price.
type priceOn struct {
	Price
	Times float64 `json:"times,omitempty"`
}

// file is models.json.
type file struct {
	AsOf     string `json:"as_of"`
	Families []struct {
		Family string `json:"family"`
		Source string `json:"source"`
		Prices string `json:"prices"`
		// PricesOn says, for each price name its models' prices_on
		// use, where the figures come from.
		PricesOn map[string]string `json:"prices_on"`
		AsOf     string            `json:"as_of"`
		Models   []struct {
			ID            string             `json:"id"`
			Aliases       []string           `json:"aliases"`
			ContextWindow int                `json:"context_window"`
			MaxOutput     int                `json:"max_output"`
			Lacks         []string           `json:"lacks"`
			Price         Price              `json:"price"`
			PricesOn      map[string]priceOn `json:"prices_on"`
			Note          string             `json:"note"`
		} `json:"models"`
	} `json:"families"`
}

// capNames are the names Lacks entries use, as llm.Capabilities.String
// spells them.
var capNames = func() map[string]llm.Capabilities {
	out := map[string]llm.Capabilities{}
	for bit := llm.Capabilities(1); bit != 0 && bit <= llm.CapAll; bit <<= 1 {
		if bit&llm.CapAll != 0 {
			out[bit.String()] = bit
		}
	}
	return out
}()

// Parse reads a catalogue in the format of models.json: an "as_of" date
// and families, each with a "family" name, a "source" URL, optionally a
// "prices" URL and its own "as_of", and "models", each with an "id" and
// optionally "aliases", "context_window", "max_output", "lacks" (names as
// llm.Capabilities.String spells them: "images", "image URLs",
// "documents", "document URLs", "tools", "native schema"), "price"
// ("input", "output", "cache_read", "cache_write", per million tokens), a
// "note" and "prices_on": the model's prices where it is served at
// another price (Model.Prices), keyed by the names Model.Prices lists, each
// either figures as in "price" or {"times": x}, the model's "price" times x
// (1.1 for a 10% premium, 0.5 for half price; an unknown figure stays
// unknown). An unknown field or price name is an error, so that a
// misspelt one is not silently unknown. The error names every problem
// found. A family's own "prices_on" gives, for each price name its
// models use, the https URL the figures were read from and what it says;
// a model's price on a name its family gives no source for is an error.
func Parse(data []byte) (*Catalog, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("catalog: data after the catalogue's closing brace")
	}
	var errs []string
	if !isDay(f.AsOf) {
		errs = append(errs, fmt.Sprintf("as_of is %q; give the date the data was checked, as YYYY-MM-DD", f.AsOf))
	}
	c := &Catalog{}
	for i, fam := range f.Families {
		if fam.Family == "" {
			errs = append(errs, fmt.Sprintf("family #%d has no name", i+1))
		}
		if !strings.HasPrefix(fam.Source, "https://") {
			errs = append(errs, fmt.Sprintf("family %q: source is %q; give the https URL its figures were read from", fam.Family, fam.Source))
		}
		asOf := fam.AsOf
		if asOf == "" {
			asOf = f.AsOf
		} else if !isDay(asOf) {
			errs = append(errs, fmt.Sprintf("family %q: as_of is %q; use YYYY-MM-DD", fam.Family, asOf))
		}
		for _, on := range slices.Sorted(maps.Keys(fam.PricesOn)) {
			switch {
			case !slices.Contains(priceNames, on):
				errs = append(errs, fmt.Sprintf("family %q: prices_on names %q, which is no price name; use one of %s", fam.Family, on, quoted(priceNames)))
			case !strings.HasPrefix(fam.PricesOn[on], "https://"):
				errs = append(errs, fmt.Sprintf("family %q: prices_on %q is %q; give the https URL its figures were read from, then what it says", fam.Family, on, fam.PricesOn[on]))
			}
		}
		for _, fm := range fam.Models {
			m := Model{ID: fm.ID, Family: fam.Family, Aliases: fm.Aliases, ContextWindow: fm.ContextWindow,
				MaxOutput: fm.MaxOutput, Price: fm.Price, Note: fm.Note, Source: fam.Source, AsOf: asOf}
			for _, on := range slices.Sorted(maps.Keys(fm.PricesOn)) {
				po := fm.PricesOn[on]
				p := po.Price
				switch {
				case slices.Contains(priceNames, on) && fam.PricesOn[on] == "":
					errs = append(errs, fmt.Sprintf("model %q: price on %q has no source; add the page it was read from to family %q's prices_on", fm.ID, on, fam.Family))
				case po.Times == 0:
				case po.Price != (Price{}):
					errs = append(errs, fmt.Sprintf("model %q: price on %q gives both times and figures; give one", fm.ID, on))
				case po.Times < 0 || math.IsNaN(po.Times) || math.IsInf(po.Times, 0):
					errs = append(errs, fmt.Sprintf("model %q: price on %q: times %v must be a positive number", fm.ID, on, po.Times))
				case fm.Price == (Price{}):
					errs = append(errs, fmt.Sprintf("model %q: price on %q is times a price the model does not have; give its figures", fm.ID, on))
				default:
					p = fm.Price.times(po.Times)
				}
				if m.Prices == nil {
					m.Prices = map[string]Price{}
				}
				m.Prices[on] = p
			}
			for _, n := range fm.Lacks {
				bit, ok := capNames[n]
				if !ok {
					errs = append(errs, fmt.Sprintf("model %q: lacks %q, which is no capability; use %s", fm.ID, n, capList()))
				}
				m.Lacks |= bit
			}
			errs = append(errs, c.add(m)...)
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("catalog: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// isDay reports whether s is a date, YYYY-MM-DD.
func isDay(s string) bool {
	_, err := time.Parse(time.DateOnly, s)
	return err == nil
}

// quoted lists names, quoted, for an error.
func quoted(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

// capList lists the capability names, quoted, for an error.
func capList() string {
	names := make([]string, 0, len(capNames))
	for n := range capNames {
		names = append(names, fmt.Sprintf("%q", n))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

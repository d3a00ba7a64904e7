package chain

import (
	"time"

	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/rank"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/spend"
	"github.com/backstop-llm/backstop/tracing"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// defaultDegradeTimeout bounds each degradation when Builder.DegradeTimeout
// is not set.
const defaultDegradeTimeout = 2 * time.Second

// Builder assembles a Chain. Its methods record the configuration and return
// the builder, so calls chain; nothing is checked until Build, which reports
// every problem at once. A Builder is not safe for concurrent use.
type Builder struct {
	name            string
	deadline        time.Duration
	degradeTimeout  time.Duration
	contentFallback bool
	restart         bool
	regions         []string
	schema          []byte
	catalog         *catalog.Catalog
	telemetry       tracing.Config
	observers       []observe.Observer
	shared          *sharedSetup
	entries         []entry
	groups          [rank.Groups]rank.Setup // Spread and Hedge, by group
	groupTiers      []Tier                  // the tiers they named, checked at Build
	caps            []priceCap              // CapPrice's, in order
	budgets         []*spend.Budget         // Spend's, checked at Build
}

type entry struct {
	tier   Tier
	target Target
	degr   degrade.Degradation
}

// New starts a chain named name. The name is recorded in errors and
// telemetry and keys last-known-good answers; it must not be empty.
func New(name string) *Builder { return &Builder{name: name} }

// Deadline bounds a whole call, waits included. A wait that would end past
// it is not slept: the chain moves on. Degradations still run after it. 0
// (the default) leaves the caller's context as the only bound.
func (b *Builder) Deadline(d time.Duration) *Builder { b.deadline = d; return b }

// DegradeTimeout bounds each degradation. 0 means 2s.
func (b *Builder) DegradeTimeout(d time.Duration) *Builder { b.degradeTimeout = d; return b }

// ContentFallback lets a content-policy refusal (KindContentFilter) move on
// to the next target. Off by default: a refusal is usually the answer, and
// shopping it around providers is a policy decision to make on purpose.
func (b *Builder) ContentFallback(allow bool) *Builder { b.contentFallback = allow; return b }

// Schema sets the JSON Schema (drafts 2020-12 or 7) every answer must pass
// before the caller sees it, whatever served it: a model target (which is
// re-asked once with the problems when its answer fails, then passed over),
// or a degradation. The validated JSON is in Result.JSON. A degrade.Static
// answer that fails it is a Build error. A target's own Schema replaces it for that
// target's answers.
func (b *Builder) Schema(schema []byte) *Builder { b.schema = schema; return b }

// Catalog sets the catalogue of models Build reads for each model target
// (package catalog): a target whose ContextWindow is 0 takes its model's
// window from it (the model is the target's Serves, or its Model), and
// what it says the model lacks is added to the target's Lacks (less the
// target's Takes). nil, the default, is catalog.Default(), the catalogue
// embedded in backstop; catalog.Default().With(...) corrects or adds
// models; an empty catalogue (catalog.New()) switches it off.
func (b *Builder) Catalog(c *catalog.Catalog) *Builder { b.catalog = c; return b }

// TracerProvider sets where the chain's spans go. The default is the otel
// global, read on every call: nothing is recorded, at the cost of one
// pointer comparison per call, until an SDK is installed.
func (b *Builder) TracerProvider(tp trace.TracerProvider) *Builder {
	b.telemetry.TracerProvider = tp
	return b
}

// MeterProvider sets where the chain's metrics go. The default is the otel
// global, read on every call.
func (b *Builder) MeterProvider(mp metric.MeterProvider) *Builder {
	b.telemetry.MeterProvider = mp
	return b
}

// CaptureContent records prompts, system instructions and answers on the
// attempt spans (gen_ai.input.messages, gen_ai.system_instructions,
// gen_ai.output.messages). Off by default: they may hold personal data. API
// keys are never recorded.
func (b *Builder) CaptureContent(capture bool) *Builder {
	b.telemetry.CaptureContent = capture
	return b
}

// Observe adds observers of every call's events (see package observe):
// each decision of the walk (attempts, retries with their waits, skips,
// fallbacks, gates, breaker changes, schema failures) is delivered to each,
// in the order given, after the OpenTelemetry observer that every chain has
// (see TracerProvider). observe.Log writes them to a log/slog Logger;
// observe.Funcs calls your functions. Calling it again adds more.
func (b *Builder) Observe(obs ...observe.Observer) *Builder {
	b.observers = append(b.observers, obs...)
	return b
}

// AllowRegions restricts where the chain's model targets may process data.
// An entry is a region ("eu-west-1", "europe-west4", "westeurope"), which
// allows that region, or a geography ("eu", "uk", "ch", "us", "ca", "sa",
// "apac", "me", "af"), which allows every region in it (the table is in
// docs/concepts.md, "Data residency"); case does not matter. A target
// processes data in its Region or, when that is empty, in its provider's
// (llm.DeployedProvider), or where its provider says it serves the target's
// Model (llm.ModelDeployedProvider: a Bedrock ARN's region; a Model the
// provider says contradicts its deployment fails Build whatever the
// regions). A Bedrock cross-region inference profile is
// judged by where it routes, whatever Region says: an "eu." Model is
// allowed only by "eu" (likewise "us.", "apac."), a "global." Model only by
// a list naming every geography. Build fails naming every model target
// outside regions, including targets whose region is unknown, with what
// to change (residency.Check says it). Degradations are exempt: they run
// in your process. Calling it again adds regions.
func (b *Builder) AllowRegions(regions ...string) *Builder {
	b.regions = append(b.regions, regions...)
	return b
}

// RestartStreams lets a stream that fails after its first chunk move on to
// the next target, visibly: the caller receives a Chunk with Restart set,
// then the new answer. Off by default: the stream ends with an error
// matching ErrIncomplete, since gluing a second, differently worded answer
// onto the first would be worse than either.
func (b *Builder) RestartStreams(restart bool) *Builder { b.restart = restart; return b }

// Primary sets the first target. A chain has exactly one, first.
func (b *Builder) Primary(t Target) *Builder { return b.add(TierPrimary, t) }

// OrDeployment adds the primary's model on another deployment (another
// region, account or endpoint). Its Model must be the primary's.
func (b *Builder) OrDeployment(t Target) *Builder { return b.add(TierDeployment, t) }

// OrSibling adds another model on the primary's provider. Its provider's
// Name must be the primary's and its Model another.
func (b *Builder) OrSibling(t Target) *Builder { return b.add(TierSibling, t) }

// OrProvider adds a model on another provider. Its provider's Name must
// differ from the primary's.
func (b *Builder) OrProvider(t Target) *Builder { return b.add(TierProvider, t) }

// OrDegrade adds a degradation, tried in order once every model target has
// failed: degrade.Static, degrade.Func, degrade.LastGood, or your own
// degrade.Degradation. Build binds each that is a degrade.Binder to the
// chain (a LastGood's configuration problems fail Build).
func (b *Builder) OrDegrade(d degrade.Degradation) *Builder {
	b.entries = append(b.entries, entry{tier: TierDegrade, degr: d})
	return b
}

// Spend adds money budgets (package spend) to every model target: each
// attempt is priced before it is sent (its worst case reserved from each
// budget, for the call's key) and settled once it ends, and a target a
// budget cannot cover is passed over, or ends the call, as the budget's
// Mode says. Budgets are asked after every other policy of the target,
// so that an attempt a breaker or a capability check refuses reserves
// nothing. A nil budget, or one given twice, fails Build. Calling it again
// adds more.
func (b *Builder) Spend(budgets ...*spend.Budget) *Builder {
	b.budgets = append(b.budgets, budgets...)
	return b
}

// checkSpend reports a nil budget and one given twice to Spend.
func (p *build) checkSpend() {
	seen := make(map[*spend.Budget]bool, len(p.b.budgets))
	for i, bud := range p.b.budgets {
		switch {
		case bud == nil:
			p.fail("", "Spend was given a nil budget (#%d); pass one spend.New returned", i)
		case seen[bud]:
			p.fail("", "Spend was given the same budget twice (#%d); give each budget once", i)
		}
		seen[bud] = true
	}
}

func (b *Builder) add(tier Tier, t Target) *Builder {
	b.entries = append(b.entries, entry{tier: tier, target: t})
	return b
}

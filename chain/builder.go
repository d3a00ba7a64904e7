package chain

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/catalog"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/modelid"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/spread"
	"github.com/backstop-llm/backstop/throttle"
	"github.com/backstop-llm/backstop/tracing"
	"github.com/backstop-llm/backstop/validate"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultDegradeTimeout bounds each degradation when Builder.DegradeTimeout
// is not set.
const DefaultDegradeTimeout = 2 * time.Second

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
	groups          [groups]groupSetup // Spread and Hedge, by tier
	groupTiers      []Tier             // the tiers they named, checked at Build
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

// DegradeTimeout bounds each degradation. 0 means DefaultDegradeTimeout.
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

func (b *Builder) add(tier Tier, t Target) *Builder {
	b.entries = append(b.entries, entry{tier: tier, target: t})
	return b
}

// Build checks the configuration and returns the chain, or every problem
// found, joined; each matches ErrInvalidConfig and names its target. It
// validates (checkChain, checkEntry, checkTarget) and compiles
// (compileObservers, compileTarget, bind) in one pass, so that a problem
// found compiling (a schema that does not compile) is reported with the
// others.
func (b *Builder) Build() (*Chain, error) {
	p := &build{b: b, c: &Chain{
		name:            b.name,
		deadline:        b.deadline,
		degradeTimeout:  b.degradeTimeout,
		contentFallback: b.contentFallback,
		restart:         b.restart,
		epoch:           time.Now(),
	}}
	c := p.c
	if c.degradeTimeout == 0 {
		c.degradeTimeout = DefaultDegradeTimeout
	}
	p.checkChain()
	p.checkGroups()
	p.compileObservers()
	if b.schema != nil {
		s, err := validate.Compile(b.schema)
		p.wrap("", "Schema is invalid", err)
		c.schema = s
	}
	p.entries()
	p.compileGroups()
	c.warnings = append(capabilityWarnings(c.targets), c.warnings...)
	p.wrap("", "an observer refused the chain", c.bind())
	if b.shared != nil {
		c.buildShared(b.shared, c.targets, func(target, problem string, err error) {
			p.errs = append(p.errs, &ConfigError{Chain: b.name, Target: target, Problem: problem, Err: err})
		})
	}
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	for _, t := range c.targets {
		t.assemble()
	}
	c.watchProbes()
	return c, nil
}

// build is one run of Build: the chain being compiled and the problems
// found so far.
type build struct {
	b    *Builder
	c    *Chain
	errs []error
}

// fail records a problem of target ("" for the chain as a whole).
func (p *build) fail(target, format string, args ...any) {
	p.errs = append(p.errs, &ConfigError{Chain: p.b.name, Target: target, Problem: fmt.Sprintf(format, args...)})
}

// wrap records err, when not nil, as a problem of target.
func (p *build) wrap(target, problem string, err error) {
	if err != nil {
		p.errs = append(p.errs, &ConfigError{Chain: p.b.name, Target: target, Problem: problem, Err: err})
	}
}

// checkChain checks the settings of the chain as a whole.
func (p *build) checkChain() {
	b := p.b
	if b.name == "" {
		p.fail("", "the chain has no name; pass one to chain.New")
	}
	if b.deadline < 0 {
		p.fail("", "Deadline is %v; it must not be negative (0 means none)", b.deadline)
	}
	if b.degradeTimeout < 0 {
		p.fail("", "DegradeTimeout is %v; it must not be negative (0 means %v)", b.degradeTimeout, DefaultDegradeTimeout)
	}
	if len(b.entries) == 0 {
		p.fail("", "the chain is empty; add a target with Primary")
	}
}

// compileObservers joins the OpenTelemetry observer, first, and Observe's.
func (p *build) compileObservers() {
	c := p.c
	var obs []observe.Observer
	if tel, err := tracing.New(p.b.telemetry); err != nil {
		p.wrap("", "the telemetry providers failed", err)
	} else {
		obs = append(obs, tel)
	}
	for i, o := range p.b.observers {
		if isNil(o) {
			p.fail("", "Observe was given a nil Observer (#%d)", i+1)
			continue
		}
		obs = append(obs, o)
	}
	c.observer = observe.Join(obs...)
	c.state.chain = c.name
	c.state.obs, _ = c.observer.(observe.StateObserver)
}

// entries checks and compiles the targets and degradations in order.
func (p *build) entries() {
	names := map[string]bool{}
	var primary *Target
	last := TierPrimary
	for i, e := range p.b.entries {
		label, ok := p.checkEntry(i, e, names, &last)
		if !ok {
			continue
		}
		if e.tier == TierDegrade {
			p.c.degrades = append(p.c.degrades, p.c.bindDegradation(e.degr, func(err error) {
				p.errs = append(p.errs, &ConfigError{Chain: p.b.name, Target: label, Err: err})
			}))
			continue
		}
		t := e.target
		p.checkTarget(label, &t)
		p.catalogue(&t)
		if e.tier == TierPrimary && i == 0 {
			primary = &t // as checked: a provider found unusable is nil
		} else if primary != nil && primary.Provider != nil && t.Provider != nil {
			checkTier(e.tier, t, primary, func(f string, a ...any) { p.fail(label, f, a...) })
		}
		ct := p.compileTarget(label, e.tier, t)
		p.c.lacks = p.c.lacks || ct.caps != llm.CapAll
		p.c.picky = p.c.picky || !ct.media.IsZero()
		p.c.targets = append(p.c.targets, ct)
	}
}

// catalogue completes t from the chain's catalogue (Builder.Catalog): its
// ContextWindow when 0, and what its model lacks, less what t Takes.
func (p *build) catalogue(t *Target) {
	cat := p.b.catalog
	if cat == nil {
		cat = catalog.Default()
	}
	m, ok := cat.Lookup(servedModel(t))
	if !ok {
		return
	}
	if t.ContextWindow == 0 {
		t.ContextWindow = m.ContextWindow
	}
	t.Lacks |= m.Lacks &^ t.Takes
}

// checkEntry checks entry i's name (present, unique) and its place in the
// order of tiers, raising *last, and returns the label its problems are
// reported under; ok is false for a nil degradation.
func (p *build) checkEntry(i int, e entry, names map[string]bool, last *Tier) (label string, ok bool) {
	name := e.target.Name
	if e.tier == TierDegrade {
		if isNil(e.degr) {
			p.fail("", "OrDegrade #%d was given a nil Degradation", i+1)
			return "", false
		}
		name = e.degr.Name()
	}
	label = name
	if label == "" {
		label = fmt.Sprintf("#%d", i+1)
	}
	switch {
	case name == "":
		p.fail(label, "%s target has no Name; give every target a unique name", e.tier.method())
	case names[name] && e.tier == TierDegrade:
		p.fail(label, "the name is used twice; wrap one degradation in degrade.Named to tell them apart")
	case names[name]:
		p.fail(label, "the name is used twice; target names must be unique in a chain")
	}
	names[name] = true
	switch {
	case e.tier == TierPrimary && i != 0:
		p.fail(label, "Primary must be the first target and come once; use OrDeployment, OrSibling or OrProvider for the others")
	case e.tier != TierPrimary && i == 0:
		p.fail(label, "the chain starts with %s; start it with Primary", e.tier.method())
	case e.tier < *last:
		p.fail(label, "%s comes after %s; tiers go Primary, OrDeployment, OrSibling, OrProvider, OrDegrade", e.tier.method(), last.method())
	}
	*last = max(*last, e.tier)
	return label, true
}

// checkTarget checks a model target's fields; a provider found unusable
// (nil, a typed nil, no name) is set to nil, for the checks that follow.
func (p *build) checkTarget(label string, t *Target) {
	if isNil(t.Provider) {
		if t.Provider != nil {
			p.fail(label, "Provider is a nil %T; pass the provider its constructor returned (did it fail?)", t.Provider)
		} else {
			p.fail(label, "Provider is nil; set it to an llm.Provider such as anthropic.New's")
		}
		t.Provider = nil
	} else if name, err := nameOf(t.Provider); err != nil || name == "" {
		if err != nil {
			p.fail(label, "Provider.Name panicked (%v); a provider must name itself", err)
		} else {
			p.fail(label, "Provider.Name returned \"\"; a provider must name itself (it is the gen_ai.provider.name of its spans, and tiers compare it)")
		}
		t.Provider = nil
	}
	for _, problem := range checkParams(&t.Params) {
		p.fail(label, "%s", problem)
	}
	if t.Budget != nil && isNil(t.Budget) {
		p.fail(label, "Budget is a nil %T; pass a budget its constructor returned, or leave Budget nil for the default", t.Budget)
	}
	if t.Model == "" {
		p.fail(label, "Model is empty; name the model to request")
	}
	if t.FirstChunkTimeout < 0 || t.IdleTimeout < 0 {
		p.fail(label, "FirstChunkTimeout (%v) and IdleTimeout (%v) must not be negative (0 means the defaults: Timeout's bound, and DefaultIdleTimeout %v)", t.FirstChunkTimeout, t.IdleTimeout, DefaultIdleTimeout)
	}
	if t.Timeout < 0 {
		p.fail(label, "Timeout is %v; it must not be negative (0 means DefaultTimeout, %v)", t.Timeout, DefaultTimeout)
	}
	if t.Patience < 0 {
		p.fail(label, "Patience is %v; it must not be negative (0 means learned from the target's answer times, at least %v, or %v for a stream's first chunk)", t.Patience, DefaultPatience, DefaultStreamPatience)
	}
	if t.ContextWindow < 0 {
		p.fail(label, "ContextWindow is %d; it must not be negative (0 means unknown)", t.ContextWindow)
	}
	if t.Weight < 0 || math.IsNaN(t.Weight) || math.IsInf(t.Weight, 0) {
		p.fail(label, "Weight is %v; use a positive share of the tier's calls (0 means 1)", t.Weight)
	}
	p.wrap(label, "Hedge is invalid", t.Hedge.Validate())
	if len(t.Probe.Messages) > 0 {
		p.wrap(label, "Probe is not a request a provider would take; fix it, or leave Probe empty", t.Probe.Validate())
	} else if !reflect.ValueOf(t.Probe).IsZero() {
		p.fail(label, "Probe has no Messages; give it one short message, or leave Probe empty for no active probe")
	}
	if t.Params.MaxTokens < 0 {
		p.fail(label, "Params.MaxTokens is %d; it must not be negative (0 means the provider's default)", t.Params.MaxTokens)
	}
	p.wrap(label, "Retry is invalid", t.Retry.Validate())
	p.checkDeployment(label, t) // Serves, Model, and AllowRegions (deployment.go)
}

// compileTarget makes what a call needs of target t: its breaker
// (reporting state changes to the observers), throttle, schema and budget.
func (p *build) compileTarget(label string, tier Tier, t Target) *target {
	c := p.c
	ob := observe.Target{Name: t.Name, Tier: tier.String(), Provider: providerName(t.Provider), Model: t.Model, Index: len(c.targets)}
	bs := t.Breaker
	var pr *prober // made below, once the target is
	if len(t.Probe.Messages) > 0 {
		bs.ActiveProbe = true
	}
	// The callback holds the chain's state observers, not the chain: the
	// breaker outlives a call, and a probe's timer holds it (prober).
	if user, notify := bs.OnStateChange, c.state; notify.obs != nil || bs.ActiveProbe {
		bs.OnStateChange = func(name string, from, to breaker.State) {
			if to == breaker.Open && pr != nil {
				pr.opened()
			}
			notify.breakerChanged(ob, from, to)
			if user != nil {
				user(name, from, to)
			}
		}
	}
	br, err := breaker.New(t.Name, bs)
	p.wrap(label, "Breaker is invalid", err)
	tc := t.Throttle
	if p.b.groups[groupOf(tier)].strategy == spread.Headroom && tc == (throttle.Config{}) {
		tc = headroomThrottle // Headroom reads the limits the headers announce, from the first request
	}
	lim, err := throttle.New(tc)
	p.wrap(label, "Throttle is invalid", err)
	sch := c.schema
	if t.Schema != nil {
		sch, err = validate.Compile(t.Schema)
		p.wrap(label, "Schema is invalid", err)
	}
	caps := llm.CapAll
	var media llm.MediaTypes
	if t.Provider != nil {
		caps = llm.CapabilitiesOf(t.Provider) &^ t.Lacks
		media = llm.MediaTypesOf(t.Provider)
	}
	native := p.native(label, t, caps)
	bud := t.Budget
	if bud == nil {
		bud, err = budget.NewRatio(budget.RatioConfig{})
		p.wrap(label, "the default budget", err)
	}
	ct := &target{
		Target:   t,
		tier:     tier,
		policy:   t.Retry.WithDefaults(),
		table:    t.Retry.Table(),
		budget:   bud,
		breaker:  br,
		maxGate:  t.Breaker.WithDefaults().MaxGate,
		schema:   sch,
		ob:       ob,
		throttle: lim,
		caps:     caps,
		media:    media,
		native:   native,
		hasParams: t.Params.MaxTokens != 0 || t.Params.Temperature != nil || t.Params.TopP != nil ||
			t.Params.Stop != nil || len(t.Params.Extra) != 0,
	}
	if len(t.Probe.Messages) > 0 {
		pr = &prober{t: ct, req: t.Probe}
		ct.prepare(&pr.req)
		ct.prober = pr
	}
	return ct
}

// native returns the schema target t sends as Request.ResponseSchema (nil
// without NativeSchema), checking that its provider (taking caps) can
// enforce it.
func (p *build) native(label string, t Target, caps llm.Capabilities) []byte {
	if !t.NativeSchema {
		return nil
	}
	schema := t.Schema
	if schema == nil {
		schema = p.b.schema
	}
	switch {
	case schema == nil:
		p.fail(label, "NativeSchema is set but neither the target nor the chain has a Schema; set one, or unset NativeSchema")
		return nil
	case t.Provider == nil:
		return nil // reported already
	case caps&llm.CapNativeSchema == 0:
		p.fail(label, "NativeSchema is set but provider %q cannot enforce a schema natively (its capabilities: %s); unset NativeSchema, the chain validates the answer all the same", t.Provider.Name(), caps)
		return nil
	}
	if sc, ok := t.Provider.(llm.SchemaChecker); ok {
		if err := sc.CheckResponseSchema(schema); err != nil {
			p.wrap(label, "NativeSchema is set but the provider cannot take the Schema natively; change the schema as the error says, or unset NativeSchema", err)
			return nil
		}
	}
	return schema
}

// capabilityWarnings lists the model targets that cannot carry what an
// earlier target takes: a request that needs it skips them, so the chain
// is shorter for it than it looks.
func capabilityWarnings(targets []*target) []string {
	var out []string
	var before llm.Capabilities // what the earlier targets take, together
	var first [8]string         // the first target that takes each capability
	for _, t := range targets {
		if miss := before &^ t.caps; miss != 0 {
			for i := range len(first) {
				if bit := llm.Capabilities(1 << i); miss&bit != 0 {
					out = append(out, fmt.Sprintf("target %q (%s) cannot carry %s, which %q takes: a request that carries them skips it",
						t.Name, t.tier, bit, first[i]))
				}
			}
		}
		for i := range len(first) {
			if bit := llm.Capabilities(1 << i); t.caps&bit != 0 && first[i] == "" {
				first[i] = t.Name
			}
		}
		before |= t.caps
	}
	return out
}

// checkTier reports a target that contradicts its tier's name. Models are
// compared by modelid.Same, each target's Serves standing for its Model
// when set: one model in any platform's id form is one model, and an alias
// is any snapshot of it.
func checkTier(tier Tier, t Target, primary *Target, fail func(string, ...any)) {
	same := t.Provider.Name() == primary.Provider.Name()
	switch tier {
	case TierDeployment:
		if !modelid.Same(servedModel(&t), servedModel(primary)) {
			fail("OrDeployment serves model %s but the primary serves %s; another deployment serves the same model (use OrSibling or OrProvider for another model)", describeModel(&t), describeModel(primary))
		}
	case TierSibling:
		if !same {
			fail("OrSibling is on provider %q but the primary is on %q; a sibling is another model of the same provider (use OrProvider)", t.Provider.Name(), primary.Provider.Name())
		}
		if modelid.Same(servedModel(&t), servedModel(primary)) {
			fail("OrSibling serves the primary's model %s (the primary: %s); a sibling is another model (use OrDeployment for the same model elsewhere)", describeModel(&t), describeModel(primary))
		}
	case TierProvider:
		if same {
			fail("OrProvider is on the primary's provider %q; use OrDeployment or OrSibling, or a provider with another Name", t.Provider.Name())
		}
	}
}

// bindDegradation compiles d for c: a degrade.Binder is bound to c's name
// and Schema (one LastGood may serve several chains; a Static answer is
// checked against the Schema), and a degrade.Rememberer is registered to
// be told of c's answers.
func (c *Chain) bindDegradation(d degrade.Degradation, fail func(err error)) degrader {
	g := degrader{name: d.Name(), d: d, ob: observe.Target{Name: d.Name(), Tier: TierDegrade.String()}}
	if b, ok := d.(degrade.Binder); ok {
		bound, err := b.Bind(c.name, c.schema)
		if err != nil {
			fail(err)
			return g
		}
		g.d = bound
	}
	if m, ok := g.d.(degrade.Rememberer); ok {
		g.mem = m
		c.memories = append(c.memories, m)
	}
	return g
}

// isNil reports whether v is nil or an interface holding a nil pointer,
// map, slice, func or channel: a typed nil, whose methods would panic when
// a call used it.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// nameOf returns p.Name(), or the panic it raised as an error.
func nameOf(p llm.Provider) (name string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return p.Name(), nil
}

// checkParams lists what in a target's Params no call could send: a
// Temperature or TopP that is NaN or infinite (JSON has no such number),
// an Extra value that cannot be encoded as JSON. Each would fail every call
// as a bad request, which stops the chain before the next target is tried.
func checkParams(p *llm.Params) []string {
	var found []string
	for _, f := range []struct {
		name string
		v    *float64
	}{{"Temperature", p.Temperature}, {"TopP", p.TopP}} {
		if f.v != nil && (math.IsNaN(*f.v) || math.IsInf(*f.v, 0)) {
			found = append(found, fmt.Sprintf("Params.%s is %v; JSON cannot carry it: use a finite number, or nil for the provider's default", f.name, *f.v))
		}
	}
	keys := make([]string, 0, len(p.Extra))
	for k := range p.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if _, err := json.Marshal(p.Extra[k]); err != nil {
			found = append(found, fmt.Sprintf("Params.Extra[%q] cannot be encoded as JSON (%v); use a value encoding/json can marshal", k, err))
		}
	}
	return found
}

// bind numbers the degradations after the model targets and tells every
// observer that wants it (observe.Binder) the chain's targets. It returns
// their refusals.
func (c *Chain) bind() error {
	all := make([]observe.Target, 0, len(c.targets)+len(c.degrades))
	for _, t := range c.targets {
		all = append(all, t.ob)
	}
	for i := range c.degrades {
		c.degrades[i].ob.Index = len(all)
		all = append(all, c.degrades[i].ob)
	}
	if b, ok := c.observer.(observe.Binder); ok {
		return b.Bind(c.name, all)
	}
	return nil
}

// stateObservers are a chain's observers of the changes that belong to no
// call (observe.StateObserver), with the chain's name. The callbacks of
// breakers and shared stores hold a copy, never the Chain, which must stay
// collectable while they live on (see prober).
type stateObservers struct {
	chain string
	obs   observe.StateObserver // nil when none observes state
}

// breakerChanged tells the state observers that t's breaker changed.
func (s stateObservers) breakerChanged(t observe.Target, from, to breaker.State) {
	if s.obs != nil {
		s.obs.Event(observe.BreakerChange{Chain: s.chain, Target: t, From: from.String(), To: to.String()})
	}
}

// sharedUnavailable tells the state observers that a shared store
// stopped answering.
func (s stateObservers) sharedUnavailable(store, target string) {
	if s.obs != nil {
		s.obs.Event(observe.SharedUnavailable{Chain: s.chain, Store: store, Target: target})
	}
}

// providerName is p's Name, or "" for a nil provider (reported elsewhere).
func providerName(p llm.Provider) string {
	if p == nil {
		return ""
	}
	return p.Name()
}

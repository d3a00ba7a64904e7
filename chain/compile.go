package chain

import (
	"errors"
	"fmt"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/callobs"
	"github.com/backstop-llm/backstop/internal/capability"
	"github.com/backstop-llm/backstop/internal/check"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/spread"
	"github.com/backstop-llm/backstop/throttle"
	"github.com/backstop-llm/backstop/validate"
)

// Build checks the configuration and returns the chain, or every problem
// found, joined; each wraps llm.ErrInvalidConfig and names its target. It
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
		c.degradeTimeout = defaultDegradeTimeout
	}
	p.checkChain()
	p.checkGroups()
	p.checkSpend()
	p.compileObservers()
	if b.schema != nil {
		s, err := validate.Compile(b.schema)
		p.wrap("", "Schema is invalid", err)
		c.schema = s
	}
	p.entries()
	p.capPrices()
	p.compileGroups()
	named := make([]capability.Named, len(c.targets))
	for i, t := range c.targets {
		named[i] = capability.Named{Name: t.Name, Tier: t.tier.String(), Caps: t.fit.Caps}
	}
	c.warnings = append(capability.Warnings(named), c.warnings...)
	p.wrap("", "an observer refused the chain", c.bind())
	if b.shared != nil {
		p.share(b.shared)
	}
	if err := errors.Join(p.errs...); err != nil {
		return nil, err
	}
	for _, t := range c.targets {
		t.assemble(b.budgets)
	}
	c.startProbes()
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

// compileObservers joins the OpenTelemetry observer, first, and Observe's.
func (p *build) compileObservers() {
	obs, err, nils := callobs.Join(p.b.telemetry, p.b.observers)
	p.wrap("", "the telemetry providers failed", err)
	for _, i := range nils {
		p.fail("", "Observe was given a nil Observer (#%d)", i)
	}
	p.c.observer, p.c.state = obs, callobs.StateOf(p.c.name, obs)
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
		m := capability.Catalogue(p.b.catalog, servedModel(&t), priceOn(&t), t.Takes, &t.ContextWindow, &t.Price, &t.Lacks)
		if e.tier == TierPrimary && i == 0 {
			primary = &t // as checked: a provider found unusable is nil
		} else if primary != nil && primary.Provider != nil && t.Provider != nil {
			checkTier(e.tier, t, primary, func(f string, a ...any) { p.fail(label, f, a...) })
		}
		ct := p.compileTarget(label, e.tier, t)
		ct.maxOutput = m.MaxOutput
		p.c.lacks = p.c.lacks || ct.fit.Caps != llm.CapAll
		p.c.picky = p.c.picky || !capability.Unlimited(ct.fit.Media)
		p.c.targets = append(p.c.targets, ct)
		p.c.fits = append(p.c.fits, &ct.fit)
	}
}

// compileTarget makes what a call needs of target t: its breaker
// (reporting state changes to the observers), throttle, schema and budget.
func (p *build) compileTarget(label string, tier Tier, t Target) *target {
	c := p.c
	ob := observe.Target{Name: t.Name, Tier: tier.String(), Model: t.Model, Index: len(c.targets)}
	if t.Provider != nil { // nil: reported by checkTarget
		ob.Provider = t.Provider.Name()
	}
	bs := t.Breaker
	if len(t.Probe.Messages) > 0 {
		bs.ActiveProbe = true // the probes: startProbes
	}
	// The callback holds the chain's state observers, not the chain: the
	// breaker outlives a call, and a probe's timer holds it (startProbes).
	bs.OnStateChange = c.state.OnBreakerChange(ob, bs.OnStateChange)
	br, err := breaker.New(t.Name, bs)
	p.wrap(label, "Breaker is invalid", err)
	tc := t.Throttle
	if p.b.groups[groupOf(tier)].Strategy == spread.Headroom && tc == (throttle.Config{}) {
		tc = headroomThrottle // Headroom reads the limits the headers announce, from the first request
	}
	lim, err := throttle.New(tc)
	p.wrap(label, "Throttle is invalid", err)
	sch := c.schema
	if t.Schema != nil {
		sch, err = validate.Compile(t.Schema)
		p.wrap(label, "Schema is invalid", err)
	}
	caps, media := capability.Carried(t.Provider, t.Lacks)
	native, problem, err := capability.Native(t.NativeSchema, t.Schema, p.b.schema, t.Provider, caps)
	if problem != "" {
		p.errs = append(p.errs, &ConfigError{Chain: p.b.name, Target: label, Problem: problem, Err: err})
	}
	bud := t.Budget
	if bud == nil {
		bud, err = budget.NewRatio(budget.RatioConfig{})
		p.wrap(label, "the default budget", err)
	}
	ct := &target{
		Target:    t,
		tier:      tier,
		policy:    t.Retry.WithDefaults(),
		table:     t.Retry.Table(),
		budget:    bud,
		breaker:   br,
		maxGate:   t.Breaker.WithDefaults().MaxGate,
		schema:    sch,
		ob:        ob,
		throttle:  lim,
		fit:       capability.Target{Caps: caps, Media: media, ContextWindow: t.ContextWindow, Model: servedModel(&t)},
		native:    native,
		hasParams: check.Params(&t.Params),
	}
	return ct
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

package chain

import (
	"fmt"
	"math"
	"reflect"

	"github.com/backstop-llm/backstop/internal/check"
	"github.com/backstop-llm/backstop/internal/modelid"
	"github.com/backstop-llm/backstop/llm"
)

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
		p.fail("", "DegradeTimeout is %v; it must not be negative (0 means %v)", b.degradeTimeout, defaultDegradeTimeout)
	}
	if len(b.entries) == 0 {
		p.fail("", "the chain is empty; add a target with Primary")
	}
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
	if err := check.Provider(t.Provider); err != nil {
		p.fail(label, "%s", err)
		t.Provider = nil // for the checks that follow
	}
	if err := t.Params.Validate(); err != nil {
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			p.fail(label, "%s", e.(*llm.Error).Message)
		}
	}
	if t.Budget != nil && isNil(t.Budget) {
		p.fail(label, "Budget is a nil %T; pass a budget its constructor returned, or leave Budget nil for the default", t.Budget)
	}
	if t.Model == "" {
		p.fail(label, "Model is empty; name the model to request")
	}
	if t.FirstChunkTimeout < 0 || t.IdleTimeout < 0 {
		p.fail(label, "FirstChunkTimeout (%v) and IdleTimeout (%v) must not be negative (0 means the defaults: Timeout's bound, and defaultIdleTimeout %v)", t.FirstChunkTimeout, t.IdleTimeout, defaultIdleTimeout)
	}
	if t.Timeout < 0 {
		p.fail(label, "Timeout is %v; it must not be negative (0 means defaultTimeout, %v)", t.Timeout, defaultTimeout)
	}
	if t.Patience < 0 {
		p.fail(label, "Patience is %v; it must not be negative (0 means learned from the target's answer times, at least 30s, or 10s for a stream's first chunk)", t.Patience)
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
	p.wrap(label, "Retry is invalid", t.Retry.Validate())
	p.checkDeployment(label, t) // Serves, Model, and AllowRegions (deployment.go)
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

// isNil is check.IsNil: v is nil, or a typed nil whose methods would
// panic when a call used it.
func isNil(v any) bool { return check.IsNil(v) }

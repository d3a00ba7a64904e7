package chain

// A Target as Build compiled it, and the request it sends.

import (
	"time"

	"github.com/backstop-llm/backstop/internal/capability"
	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/internal/pricecap"
	"github.com/backstop-llm/backstop/internal/rank"
	"github.com/backstop-llm/backstop/internal/seam"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/spend"
	"github.com/backstop-llm/backstop/throttle"
	"github.com/backstop-llm/backstop/validate"
)

// target is a Target as Build compiled it, with the state that lives
// between calls.
type target struct {
	Target
	// policies are what the walk asks before each attempt and tells after
	// it, in order (assemble).
	policies seam.Set
	tier     Tier
	policy   retry.Policy // Retry with defaults filled in
	table    retry.Table  // the decision table with Retry.Rules applied
	budget   budget.Budget
	breaker  *breaker.Breaker
	gate     breaker.Gate
	maxGate  time.Duration
	// hasParams is false when Params is zero, sparing the healthy path
	// the merge.
	hasParams bool
	// maxOutput is the model's output limit from the catalogue (0:
	// unknown): a request without MaxTokens may cost that much output.
	maxOutput int
	// schema validates this target's answers; nil when neither the chain
	// nor the target has one.
	schema   *validate.Schema
	ob       observe.Target    // how events name it
	throttle *throttle.Limiter // nil when off
	// fit is what it carries (what its provider takes, less Lacks; the
	// media types; its context window), its capability check.
	fit capability.Target
	// native is the schema sent as Request.ResponseSchema (NativeSchema);
	// nil when off.
	native []byte
	// cap is its price cap (Builder.CapPrice); nil when uncapped.
	cap *pricecap.Cap
	// group is the tier's spreading and hedging, shared by its targets;
	// load its in-flight count and latency, kept when the tier's strategy
	// or hedging reads them (nil otherwise); hedge the hedging of its
	// attempts (nil when off).
	group *rank.Group
	load  *rank.Load
	hedge *rank.Hedging
	// answers and firsts are its latest answer times, whole and (a
	// stream's) to the first chunk, that its patience learns from.
	answers, firsts latency.Window
}

// assemble lists t's policies, in the order the walk asks them (after
// checking the call's deadline, which is the walk's own): whether t can
// carry the request (internal/capability), the Retry-After gate, the
// breaker, self-throttling and the retry budget, then the target's own
// (Target.Policies), then the chain's money budgets (Builder.Spend): last,
// so that an attempt another refuses reserves no money. Build calls it
// once every policy's state is made (Builder.Shared replaces a target's
// budget).
func (t *target) assemble(money []*spend.Budget) {
	ps := make(seam.Set, 0, 7+len(t.Policies)+len(money))
	ps = append(ps, &t.fit)
	if t.cap != nil {
		ps = append(ps, t.cap)
	}
	ps = append(ps, &t.gate, t.breaker)
	if t.throttle != nil {
		ps = append(ps, t.throttle)
	}
	ps = append(ps, seam.Retries(t.budget))
	ps = append(ps, t.Policies...)
	for _, m := range money {
		ps = append(ps, m)
	}
	t.policies = ps
	if t.hedge != nil {
		t.hedge.Admit = seam.Hedges(t.hedge.Budget)
	}
}

// prepare turns the caller's request, copied into req, into the request
// sent to t: t's model, and t's System and Params wherever t sets them.
func (t *target) prepare(req *llm.Request) {
	req.Model = t.Model
	if t.System != "" || t.hasParams || t.native != nil {
		t.override(req)
	}
}

// override sets what t sets of req beyond its model: its System, its
// Params and its native response schema.
func (t *target) override(req *llm.Request) {
	if t.System != "" {
		req.System = t.System
	}
	if t.hasParams {
		mergeInto(&req.Params, &t.Params)
	}
	if t.native != nil {
		req.ResponseSchema = t.native
	}
}

// mergeInto sets each field of over that is set into p; Extra maps are
// merged into a new map, over's keys winning.
func mergeInto(p, over *llm.Params) {
	if over.MaxTokens != 0 {
		p.MaxTokens = over.MaxTokens
	}
	if over.Temperature != nil {
		p.Temperature = over.Temperature
	}
	if over.TopP != nil {
		p.TopP = over.TopP
	}
	if over.Stop != nil {
		p.Stop = over.Stop
	}
	switch {
	case len(over.Extra) == 0:
	case len(p.Extra) == 0:
		p.Extra = over.Extra
	default:
		m := make(map[string]any, len(p.Extra)+len(over.Extra))
		for k, v := range p.Extra {
			m[k] = v
		}
		for k, v := range over.Extra {
			m[k] = v
		}
		p.Extra = m
	}
}

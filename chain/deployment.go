package chain

import (
	"fmt"

	"github.com/backstop-llm/backstop/internal/modelid"
	"github.com/backstop-llm/backstop/internal/residency"
)

// This file holds Build's calls about deployments: which model a target
// serves (tiers compare it, internal/modelid says when two ids are one
// model), and where it processes data (AllowRegions, package residency).

// servedModel is the model t serves: Serves, or Model when Serves is empty.
func servedModel(t *Target) string {
	if t.Serves != "" {
		return t.Serves
	}
	return t.Model
}

// describeModel quotes the model t serves for a Build error: `"gpt-4o"`,
// or `"my-gpt-eu" (Serves "gpt-4o")`.
func describeModel(t *Target) string {
	if t.Serves != "" {
		return fmt.Sprintf("%q (Serves %q)", t.Model, t.Serves)
	}
	return fmt.Sprintf("%q", t.Model)
}

// priceOn names the catalogue's price for where and how t is served
// (catalog.Model.PriceFor): the service tier its Params ask for (OpenAI's
// service_tier "flex" or "priority", in Params.Extra), else where its
// provider serves its model (residency.PriceOn: Bedrock's and Vertex's
// regional endpoints).
func priceOn(t *Target) string {
	if st, ok := t.Params.Extra["service_tier"].(string); ok && (st == "flex" || st == "priority") {
		return st
	}
	return residency.PriceOn(t.Provider, t.Model)
}

// checkDeployment checks what t says about its deployment: that Serves
// does not contradict a Model that is itself a model id, that its provider
// serves Model where it says it is deployed, and, when the chain restricts
// regions, that t processes data inside them.
func (p *build) checkDeployment(label string, t *Target) {
	if t.Serves != "" && t.Model != "" && modelid.Contradicts(t.Model, t.Serves) {
		p.fail(label, "Serves is %q but Model %q is itself a model id, of another model; correct Serves, or leave it empty (it is for names that are not model ids, such as an Azure deployment name)", t.Serves, t.Model)
	}
	p.wrap(label, "Model is not served where its provider says it is deployed", residency.Served(t.Provider, t.Model))
	if err := residency.Check(p.b.regions, residency.Where{Model: t.Model, Region: t.Region, Provider: t.Provider}); err != nil {
		p.fail(label, "%v", err)
	}
}

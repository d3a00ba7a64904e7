package chain

import (
	"fmt"
	"strings"

	"github.com/backstop-llm/backstop/internal/modelid"
	"github.com/backstop-llm/backstop/internal/residency"
	"github.com/backstop-llm/backstop/llm"
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

// priceOn names where t is served among the prices the catalogue keeps
// per deployment (catalog.Model.PriceFor): "bedrock-regional" for a
// Bedrock model id or inference profile that is not global. (a regional
// or geographic endpoint), "vertex-regional" for a Vertex region other
// than global; "" (the vendor's standard price) otherwise. A provider
// that does not say where it is deployed is priced as its vendor's API.
func priceOn(t *Target) string {
	dp, ok := t.Provider.(llm.DeployedProvider)
	if !ok {
		return ""
	}
	d := dp.Deployment()
	if md, ok := t.Provider.(llm.ModelDeployedProvider); ok {
		if md, err := md.ModelDeployment(t.Model); err == nil {
			d = md
		}
	}
	switch d.Platform {
	case "bedrock":
		id := t.Model[strings.LastIndexByte(t.Model, '/')+1:] // an ARN's profile id
		if !strings.HasPrefix(id, "global.") {
			return "bedrock-regional"
		}
	case "vertex":
		if d.Region != "" && d.Region != "global" {
			return "vertex-regional"
		}
	}
	return ""
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

package chain

import (
	"fmt"
	"slices"
	"strings"

	"github.com/backstop-llm/backstop/internal/modelid"
	"github.com/backstop-llm/backstop/llm"
)

// This file holds Build's rules about deployments: when two targets serve
// one model (tiers), and where a target processes data (AllowRegions).

// canonicalModel is modelid.Canonical: a model id reduced to its family
// and snapshot date, and whether it is a recognisable model id.
func canonicalModel(id string) (family, date string, known bool) { return modelid.Canonical(id) }

// sameModel is modelid.Same: whether model ids a and b name one model.
func sameModel(a, b string) bool { return modelid.Same(a, b) }

// namedAfter reports whether the deployment name model is the id serves
// with a suffix of its own ("gpt-4o-prod" serving gpt-4o): a name, not a
// contradiction. A suffix that names a model is no name of one's own: a
// part of it that starts with a digit (a version, a date, a context size:
// claude-sonnet-4-5 is not claude-sonnet-4 named "5") or that is a word
// the vendors tell their models apart by (gpt-4o-mini is not gpt-4o
// named "mini").
func namedAfter(model, serves string) bool {
	m, s := strings.ToLower(strings.TrimSpace(model)), strings.ToLower(strings.TrimSpace(serves))
	suffix, ok := strings.CutPrefix(m, s+"-")
	if !ok {
		return false
	}
	for part := range strings.SplitSeq(suffix, "-") {
		if part != "" && part[0] >= '0' && part[0] <= '9' || slices.Contains(modelWords, part) {
			return false
		}
	}
	return true
}

// modelWords are the words OpenAI and Google put after a model's name to
// name another model (gpt-4o-mini, o3-pro, gemini-2.5-flash-lite,
// gpt-4o-realtime-preview): a deployment name ending in one names that
// model, not its own.
var modelWords = []string{"mini", "nano", "turbo", "pro", "max", "ultra", "lite", "flash", "audio", "realtime",
	"search", "transcribe", "tts", "codex", "chat", "instruct", "vision", "image", "preview", "exp", "latest", "thinking"}

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

// checkDeployment checks what t says about its deployment: that Serves
// does not contradict a Model that is itself a model id, and, when the
// chain restricts regions, that t processes data inside them.
func (p *build) checkDeployment(label string, t *Target) {
	if t.Serves != "" && t.Model != "" {
		if _, _, known := canonicalModel(t.Model); known && !sameModel(t.Model, t.Serves) && !namedAfter(t.Model, t.Serves) {
			p.fail(label, "Serves is %q but Model %q is itself a model id, of another model; correct Serves, or leave it empty (it is for names that are not model ids, such as an Azure deployment name)", t.Serves, t.Model)
		}
	}
	d, err := modelDeploymentOf(t.Provider, t.Model)
	if err != nil {
		p.wrap(label, "Model is not served where its provider says it is deployed", err)
	}
	p.checkResidency(label, t, d)
}

// Geographies are what AllowRegions entries name beside regions: an entry
// that is a geography allows every region the table puts in it. "eu" is
// the EU and EEA (GDPR applies); the UK and Switzerland, outside it, are
// geographies of their own, "uk" and "ch", even where a cloud names their
// regions as European (AWS eu-west-2 London, eu-central-2 Zurich; GCP
// europe-west2, europe-west6). A region the table does not list (Mexico,
// China, a new one) is in no geography: only an entry equal to it allows
// it.
//
//	AWS    eu-* eu; eu-west-2 uk; eu-central-2 ch; us-* (us-gov-* too) us;
//	       ap-* apac; ca-* ca; sa-* sa; me-*, il-* me; af-* af
//	GCP    europe-* eu; europe-west2 uk; europe-west6 ch; us-* us;
//	       northamerica-northeast* ca; southamerica-* sa; asia-*,
//	       australia-* apac; me-* me; africa-* af
//	Azure  the names in azureGeography
var geographies = []string{"eu", "uk", "ch", "us", "ca", "sa", "apac", "me", "af"}

// regionGeography is, by prefix, the geography of AWS and GCP regions;
// the longest matching prefix wins.
var regionGeography = map[string]string{
	// AWS
	"eu-": "eu", "eu-west-2": "uk", "eu-central-2": "ch",
	"us-": "us", "ap-": "apac", "ca-": "ca", "sa-": "sa", "me-": "me", "il-": "me", "af-": "af",
	// GCP (us-, me- as AWS)
	"europe-": "eu", "europe-west2": "uk", "europe-west6": "ch",
	"northamerica-northeast": "ca", "southamerica-": "sa",
	"asia-": "apac", "australia-": "apac", "africa-": "af",
}

// azureGeography is the geography of Azure regions, by name.
var azureGeography = map[string]string{}

func init() {
	for geo, names := range map[string]string{
		"eu": "westeurope northeurope francecentral francesouth germanywestcentral germanynorth " +
			"swedencentral swedensouth norwayeast norwaywest polandcentral italynorth spaincentral",
		"uk": "uksouth ukwest",
		"ch": "switzerlandnorth switzerlandwest",
		"us": "eastus eastus2 westus westus2 westus3 centralus northcentralus southcentralus " +
			"westcentralus usgovvirginia usgovarizona usgovtexas",
		"ca": "canadacentral canadaeast",
		"sa": "brazilsouth brazilsoutheast chilecentral",
		"apac": "eastasia southeastasia japaneast japanwest koreacentral koreasouth australiaeast " +
			"australiasoutheast australiacentral australiacentral2 centralindia southindia westindia " +
			"jioindiacentral jioindiawest newzealandnorth indonesiacentral malaysiawest",
		"me": "uaenorth uaecentral qatarcentral israelcentral",
		"af": "southafricanorth southafricawest",
	} {
		for _, n := range strings.Fields(names) {
			azureGeography[n] = geo
		}
	}
}

// geographyOf returns the geography region (lowercased) is in: itself
// when it is a geography, "" when the table does not list it.
func geographyOf(region string) string {
	if slices.Contains(geographies, region) {
		return region
	}
	if g, ok := azureGeography[region]; ok {
		return g
	}
	best, geo := 0, ""
	for prefix, g := range regionGeography {
		if len(prefix) > best && strings.HasPrefix(region, prefix) {
			best, geo = len(prefix), g
		}
	}
	return geo
}

// profileGeography is the geography a Bedrock inference profile prefix
// routes within; "global" is the whole world.
var profileGeography = map[string]string{
	"us": "us", "us-gov": "us", "eu": "eu", "apac": "apac", "jp": "apac", "au": "apac", "global": "global",
}

// profileOf is the geography Bedrock inference profile model (an id or
// the ARN of one) routes within, ok false when model is not a profile.
func profileOf(model string) (prefix, geo string, ok bool) {
	prefix, _, ok = modelid.BedrockProfile(modelid.StripPath(strings.ToLower(strings.TrimSpace(model))))
	if !ok {
		return "", "", false
	}
	return prefix, profileGeography[prefix], true
}

// allowsGeography reports whether an entry of allowed is geography geo.
func allowsGeography(allowed []string, geo string) bool {
	return slices.ContainsFunc(allowed, func(e string) bool { return strings.EqualFold(strings.TrimSpace(e), geo) })
}

// allowsRegion reports whether allowed allows region: an entry equal to
// it, or a geography that holds it (case-insensitive).
func allowsRegion(allowed []string, region string) bool {
	r := strings.ToLower(strings.TrimSpace(region))
	geo := geographyOf(r)
	for _, e := range allowed {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == r || (geo != "" && e == geo) {
			return true
		}
	}
	return false
}

// checkResidency reports a target that may process data outside the
// chain's AllowRegions. A Bedrock cross-region inference profile is judged
// by where it routes, whatever Region says: an eu. profile anywhere in the
// eu geography, so only an "eu" entry allows it; a global. profile
// anywhere, so only a list naming every geography does. Any other target
// processes data in its Region or, when that is empty, its provider's
// (llm.DeployedProvider; for the target's Model, llm.ModelDeployedProvider,
// which d is).
func (p *build) checkResidency(label string, t *Target, d *llm.Deployment) {
	allowed := p.b.regions
	if len(allowed) == 0 {
		return
	}
	if prefix, geo, ok := profileOf(t.Model); ok {
		switch {
		case geo == "global":
			if slices.ContainsFunc(geographies, func(g string) bool { return !allowsGeography(allowed, g) }) {
				p.fail(label, "Model %q is outside the allowed regions %q: global. inference profiles route worldwide; %s", t.Model, allowed, profileAdvice(allowed))
			}
		case !allowsGeography(allowed, geo):
			p.fail(label, "Model %q is %s. inference profile, which routes anywhere in geography %q, outside the allowed regions %q; allow %q, or use a profile or model id inside them", t.Model, profileArticle(prefix), geo, allowed, geo)
		}
		return
	}
	region, notes := t.Region, []string(nil)
	if region == "" && d != nil {
		region, notes = d.Region, append(notes, "where its provider serves its Model")
	} else if region == "" && t.Provider != nil {
		d, err := deploymentOf(t.Provider)
		if err != nil {
			p.fail(label, "Provider.Deployment panicked (%v); set the target's Region", err)
			return
		}
		region, notes = d.Region, append(notes, "its provider's deployment")
	}
	switch {
	case region == "":
		p.fail(label, "Region is empty and its provider does not say where it is deployed, but the chain allows only regions %q; set the target's Region", allowed)
	case !allowsRegion(allowed, region):
		if geo := geographyOf(strings.ToLower(strings.TrimSpace(region))); geo != "" && !strings.EqualFold(geo, region) {
			notes = append(notes, fmt.Sprintf("geography %q", geo))
		}
		note := ""
		if len(notes) > 0 {
			note = " (" + strings.Join(notes, ", ") + ")"
		}
		p.fail(label, "Region %q%s is outside the allowed regions %q; remove the target or allow its region", region, note, allowed)
	}
}

// profileAdvice suggests, for a global. profile, a profile inside allowed.
func profileAdvice(allowed []string) string {
	for _, e := range allowed {
		e = strings.ToLower(strings.TrimSpace(e))
		for prefix, geo := range profileGeography {
			if geo == e && prefix == e {
				return "use " + profileArticle(e) + ". profile"
			}
		}
	}
	return "use a model id or inference profile inside them"
}

// profileArticle is prefix with its article: "an eu", "a us".
func profileArticle(prefix string) string {
	if strings.HasPrefix(prefix, "us") || !strings.ContainsAny(prefix[:1], "aeio") {
		return "a " + prefix
	}
	return "an " + prefix
}

// modelDeploymentOf returns where p serves model when p says
// (llm.ModelDeployedProvider), nil when it does not, and the error it
// returned or the panic it raised.
func modelDeploymentOf(p llm.Provider, model string) (d *llm.Deployment, err error) {
	mp, ok := p.(llm.ModelDeployedProvider)
	if !ok || model == "" {
		return nil, nil
	}
	defer func() {
		if r := recover(); r != nil {
			d, err = nil, fmt.Errorf("ModelDeployment panicked: %v", r)
		}
	}()
	dep, err := mp.ModelDeployment(model)
	return &dep, err
}

// deploymentOf returns p's Deployment when it declares one
// (llm.DeployedProvider), or the panic it raised as an error.
func deploymentOf(p llm.Provider) (d llm.Deployment, err error) {
	dp, ok := p.(llm.DeployedProvider)
	if !ok {
		return d, nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return dp.Deployment(), nil
}

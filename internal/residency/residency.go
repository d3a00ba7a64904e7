// Package residency decides where a model target processes data and
// whether that is inside a list of allowed regions: the rule behind
// chain.Builder.AllowRegions, which calls Check for each model target at
// Build. It owns the geography table (which cloud regions of AWS, GCP and
// Azure are in "eu", "uk", "ch", "us", "ca", "sa", "apac", "me", "af"),
// where a Bedrock cross-region inference profile routes, and how a target's
// region is learned from its provider (llm.DeployedProvider,
// llm.ModelDeployedProvider).
//
// An allowed entry is a region ("eu-west-1", "europe-west4", "westeurope"),
// which allows that region only, or a geography, which allows every region
// the table puts in it; case and surrounding spaces do not matter. "eu" is
// the EU and EEA (GDPR applies); the UK and Switzerland, outside it, are
// geographies of their own even where a cloud names their regions as
// European (AWS eu-west-2 London, eu-central-2 Zurich; GCP europe-west2,
// europe-west6). A region the table does not list (Mexico, China, a new
// one) is in no geography: only an entry equal to it allows it. The whole
// table is in docs/concepts.md, "Data residency".
package residency

import (
	"fmt"
	"slices"
	"strings"

	"github.com/backstop-llm/backstop/internal/modelid"
	"github.com/backstop-llm/backstop/llm"
)

// Where is what a chain knows about where a target processes data. The
// zero value is a target of unknown region, which only an empty allowed
// list allows.
type Where struct {
	// Model is the model id the target sends. A Bedrock cross-region
	// inference profile ("eu.anthropic.…", or the ARN of one) is judged
	// by where it routes, whatever Region and Provider say.
	Model string
	// Region is where the target processes data ("eu-west-1", "eu").
	// Empty: where Provider says.
	Region string
	// Provider is asked where the target processes data when Region is
	// empty: where it serves Model (llm.ModelDeployedProvider), else its
	// deployment (llm.DeployedProvider). Nil, or a provider that says
	// neither, leaves the region unknown.
	Provider llm.Provider
}

// Check returns nil when allowed is empty (no restriction) or w processes
// data inside it, and otherwise an error that says what to change: allow
// the region or geography, set the target's Region, or use a model id or
// inference profile inside the allowed regions. A Bedrock eu. profile is
// allowed only by "eu" (likewise us. and us-gov. by "us"; apac., jp. and
// au. by "apac"), a global. profile only by a list naming every geography.
func Check(allowed []string, w Where) error {
	if len(allowed) == 0 {
		return nil
	}
	if prefix, geo, ok := profileOf(w.Model); ok {
		switch {
		case geo == "global":
			if slices.ContainsFunc(geographies, func(g string) bool { return !allowsGeography(allowed, g) }) {
				return fmt.Errorf("Model %q is outside the allowed regions %q: global. inference profiles route worldwide; %s", w.Model, allowed, profileAdvice(allowed))
			}
		case !allowsGeography(allowed, geo):
			return fmt.Errorf("Model %q is %s. inference profile, which routes anywhere in geography %q, outside the allowed regions %q; allow %q, or use a profile or model id inside them", w.Model, profileArticle(prefix), geo, allowed, geo)
		}
		return nil
	}
	region, notes := w.Region, []string(nil)
	if region == "" && w.Provider != nil {
		if d, _ := modelDeployment(w.Provider, w.Model); d != nil { // its error is Served's
			region, notes = d.Region, append(notes, "where its provider serves its Model")
		} else {
			d, err := deployment(w.Provider)
			if err != nil {
				return fmt.Errorf("Provider.Deployment panicked (%v); set the target's Region", err)
			}
			region, notes = d.Region, append(notes, "its provider's deployment")
		}
	}
	switch {
	case region == "":
		return fmt.Errorf("Region is empty and its provider does not say where it is deployed, but the chain allows only regions %q; set the target's Region", allowed)
	case !allowsRegion(allowed, region):
		if geo := geographyOf(strings.ToLower(strings.TrimSpace(region))); geo != "" && !strings.EqualFold(geo, region) {
			notes = append(notes, fmt.Sprintf("geography %q", geo))
		}
		note := ""
		if len(notes) > 0 {
			note = " (" + strings.Join(notes, ", ") + ")"
		}
		return fmt.Errorf("Region %q%s is outside the allowed regions %q; remove the target or allow its region", region, note, allowed)
	}
	return nil
}

// Served returns the error p gives when model contradicts where p is
// deployed (llm.ModelDeployedProvider: a Bedrock ARN of another region
// than the client's), or the panic ModelDeployment raised as an error; nil
// when p does not say, or model is empty. Build reports it whatever the
// allowed regions.
func Served(p llm.Provider, model string) error {
	_, err := modelDeployment(p, model)
	return err
}

// geographies are what allowed entries name beside regions: an entry that
// is a geography allows every region the table puts in it.
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

// modelDeployment returns where p serves model when p says
// (llm.ModelDeployedProvider), nil when it does not, and the error it
// returned or the panic it raised.
func modelDeployment(p llm.Provider, model string) (d *llm.Deployment, err error) {
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

// PriceOn names where provider p serves model among the prices the
// catalogue keeps per deployment (catalog.Model.PriceFor):
// "bedrock-regional" for a Bedrock model id or inference profile that is
// not global. (a regional or geographic endpoint), "vertex-regional" for
// a Vertex region other than global; "" (the vendor's standard price)
// otherwise, and for a provider that does not say where it is deployed,
// or panics saying it (Served reports that).
func PriceOn(p llm.Provider, model string) string {
	d, err := deployment(p)
	if err != nil {
		return ""
	}
	if md, err := modelDeployment(p, model); err == nil && md != nil {
		d = *md
	}
	switch d.Platform {
	case "bedrock":
		if id := model[strings.LastIndexByte(model, '/')+1:]; !strings.HasPrefix(id, "global.") { // an ARN's profile id
			return "bedrock-regional"
		}
	case "vertex":
		if d.Region != "" && d.Region != "global" {
			return "vertex-regional"
		}
	}
	return ""
}

// deployment returns p's Deployment when it declares one
// (llm.DeployedProvider), or the panic it raised as an error.
func deployment(p llm.Provider) (d llm.Deployment, err error) {
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

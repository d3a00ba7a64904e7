package chain

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/backstop-llm/backstop/llm"
)

// This file holds Build's rules about deployments: when two targets serve
// one model (tiers), and where a target processes data (AllowRegions).

// canonicalModel reduces a model id to what identifies the model: its
// family and its snapshot date ("" for an alias). known reports whether id
// is a recognisable model id, as opposed to a name of the user's own (an
// Azure deployment name) or of an unknown server.
//
// Claude ids are recognised in every platform's form, all reduced to the
// Anthropic API's (family "claude-sonnet-4-5", date "20250929"):
//
//	claude-sonnet-4-5-20250929                       Anthropic API
//	claude-sonnet-4-5, claude-3-5-sonnet-latest      aliases (no date)
//	claude-sonnet-4-0                                alias of claude-sonnet-4
//	anthropic.claude-sonnet-4-5-20250929-v1:0        Bedrock model id
//	eu.anthropic.claude-sonnet-4-5-20250929-v1:0     Bedrock cross-region inference profile (us., eu., apac., global., us-gov., jp., au.)
//	arn:aws:bedrock:…:inference-profile/eu.anthropic.… Bedrock ARN ending in one of those
//	claude-sonnet-4-5@20250929                       Vertex
//	publishers/anthropic/models/claude-…             Vertex resource path
//
// The Bedrock version suffix after the date (-v1:0, -v2:0, a :200k
// context suffix) is dropped: the date names the snapshot
// (anthropic.claude-3-5-sonnet-20241022-v2:0 is claude-3-5-sonnet-20241022). Any other id passes through lowercased,
// with a leading "models/" (Gemini) or a resource path up to ".../models/"
// (Vertex) removed, and a Bedrock profile prefix removed from another
// vendor's Bedrock id (us.amazon.nova-pro-v1:0 is amazon.nova-pro-v1:0);
// it is known when it starts with a known OpenAI or Gemini family and a
// version (gpt-4o, chatgpt-4o-latest, gemini-2.5-pro; o1, o3, o4 alone or
// followed by "-"). A known id's snapshot is split off as a Claude id's
// date is (snapshotOf): gpt-4o-mini-2024-07-18 is family gpt-4o-mini,
// date 20240718. The family is the whole name before the snapshot, never
// a prefix of it: gpt-4o-mini is not gpt-4o.
func canonicalModel(id string) (family, date string, known bool) {
	s := strings.ToLower(strings.TrimSpace(id))
	s = stripModelPath(s)
	if _, rest, ok := bedrockProfile(s); ok {
		s = rest
	}
	if c, ok := strings.CutPrefix(s, "anthropic."); ok && strings.HasPrefix(c, "claude-") {
		s = c
	}
	if !strings.HasPrefix(s, "claude-") {
		if !knownFamily(s) {
			return s, "", false
		}
		family, date = snapshotOf(s)
		return family, date, true
	}
	s = bedrockVersion.ReplaceAllString(s, "$1")
	if f, d, ok := strings.Cut(s, "@"); ok { // Vertex
		s, date = f, d
		if date == "latest" {
			date = ""
		}
	} else if i := strings.LastIndexByte(s, '-'); i >= 0 && isDate(s[i+1:]) {
		s, date = s[:i], s[i+1:]
	} else {
		s = strings.TrimSuffix(s, "-latest")
	}
	if m := zeroMinor.FindStringSubmatch(s); m != nil { // claude-sonnet-4-0 is claude-sonnet-4
		s = m[1]
	}
	return s, date, true
}

// sameModel reports whether model ids a and b name one model: the same
// family (canonicalModel), and the same date unless either is an alias
// (no date), which matches any snapshot of its family.
func sameModel(a, b string) bool {
	fa, da, _ := canonicalModel(a)
	fb, db, _ := canonicalModel(b)
	return fa == fb && (da == "" || db == "" || da == db)
}

var (
	// bedrockVersion is a Bedrock model id's version suffix after its
	// date: -v1:0, -v2:0, -v1, and provisioned throughput's context suffix
	// (:200k). Legacy ids without a date (anthropic.claude-v2:1, Claude
	// 2.1) keep theirs: there it names the model.
	bedrockVersion = regexp.MustCompile(`(-\d{8})-v\d+(:\d+)?(:\d+k)?$`)
	// openAIDate is an OpenAI dated snapshot: the model's name, then
	// -YYYY-MM-DD.
	openAIDate = regexp.MustCompile(`^(.+)-(\d{4})-(\d{2})-(\d{2})$`)
	// zeroMinor is a family whose minor version is 0 (claude-opus-4-0).
	zeroMinor = regexp.MustCompile(`^(claude-[a-z]+-\d+)-0$`)
	// profileID is a Bedrock cross-region inference profile id: a
	// geography prefix, then a vendor's Bedrock model id (vendor.model).
	profileID = regexp.MustCompile(`^(us|eu|apac|global|us-gov|jp|au)\.([a-z][a-z0-9]*\..+)$`)
)

// stripModelPath removes what surrounds a model id in a resource name: a
// Bedrock ARN up to its last "/", a leading "models/" (Gemini) or a path
// up to ".../models/" (Vertex).
func stripModelPath(s string) string {
	if strings.HasPrefix(s, "arn:") {
		if i := strings.LastIndexByte(s, '/'); i >= 0 {
			return s[i+1:]
		}
		return s
	}
	if r, ok := strings.CutPrefix(s, "models/"); ok {
		return r
	}
	if i := strings.LastIndex(s, "/models/"); i >= 0 {
		return s[i+len("/models/"):]
	}
	return s
}

// bedrockProfile splits a Bedrock cross-region inference profile id (s
// lowercased, its ARN stripped) into its prefix ("eu") and the model id it
// routes ("anthropic.claude-…"); ok is false for any other id.
func bedrockProfile(s string) (prefix, rest string, ok bool) {
	m := profileID.FindStringSubmatch(s)
	if m == nil {
		return "", "", false
	}
	return m[1], m[2], true
}

// isDate reports whether s is a snapshot date: eight digits.
func isDate(s string) bool { return len(s) == 8 && isDigits(s) }

// isDigits reports whether s is one or more decimal digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// snapshotOf splits a known OpenAI or Gemini id (lowercased) into its
// family and its snapshot ("" for an alias): OpenAI's dated snapshots
// (gpt-4o-2024-08-06, o3-mini-2025-01-31: date 20240806, 20250131) and
// its older four-digit ones (gpt-4-0613: 0613), Gemini's stable versions
// (gemini-2.0-flash-001: 001).
func snapshotOf(s string) (family, snapshot string) {
	if m := openAIDate.FindStringSubmatch(s); m != nil {
		return m[1], m[2] + m[3] + m[4]
	}
	i := strings.LastIndexByte(s, '-')
	if i < 0 || !isDigits(s[i+1:]) {
		return s, ""
	}
	switch tail := s[i+1:]; {
	case len(tail) == 4 && (strings.HasPrefix(s, "gpt-") || strings.HasPrefix(s, "chatgpt-")),
		len(tail) == 3 && strings.HasPrefix(s, "gemini-"):
		return s[:i], tail
	}
	return s, ""
}

// knownFamily reports whether s (lowercased) starts with a known OpenAI or
// Gemini model family and a version: gpt-4o, chatgpt-4o-latest,
// gemini-2.5-pro; not gpt-eu, a deployment name of someone's own.
func knownFamily(s string) bool {
	for _, p := range []string{"gpt-", "chatgpt-", "gemini-"} {
		if r, ok := strings.CutPrefix(s, p); ok && r != "" && r[0] >= '0' && r[0] <= '9' {
			return true
		}
	}
	for _, p := range []string{"o1", "o3", "o4"} {
		if r, ok := strings.CutPrefix(s, p); ok && (r == "" || r[0] == '-') {
			return true
		}
	}
	return false
}

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
	prefix, _, ok = bedrockProfile(stripModelPath(strings.ToLower(strings.TrimSpace(model))))
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

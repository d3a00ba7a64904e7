package anthropicsdk

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/backstop-llm/backstop/llm"
)

// ModelDeployment returns where a request for model is served, for a chain
// to judge at Build (llm.ModelDeployedProvider): the platform and
// Config.Region, but on Bedrock the region a model or inference-profile
// ARN names ("arn:aws:bedrock:us-east-1:…:application-inference-profile/…"
// is served in us-east-1). It fails when model contradicts Config.Region:
// an ARN of another region (Bedrock serves an ARN only from its own
// region), or a cross-region inference profile id ("us.anthropic.…",
// "eu.", "apac.", "jp.", "au.", "ca.", "us-gov.") whose geography does not
// hold Config.Region (Bedrock takes one only from a region of its
// geography; "global." from any). The error names both.
func (p *Provider) ModelDeployment(model string) (llm.Deployment, error) {
	d := p.Deployment()
	if p.platform != PlatformBedrock {
		return d, nil
	}
	region, prefix := bedrockModelRegion(model)
	switch {
	case region != "":
		if !strings.EqualFold(region, p.region) {
			return llm.Deployment{Platform: p.platform, Region: region}, fmt.Errorf(
				"%s: model %q is served in region %q, but Config.Region is %q: Bedrock serves an ARN only from its own region; build the client for %s and set Config.Region to it, or use a model of %s",
				p.Name(), model, region, p.region, region, p.region)
		}
		d.Region = region
	case prefix != "":
		if !profileTakes(prefix, p.region) {
			return d, fmt.Errorf("%s: model %q is a %s. cross-region inference profile, which Bedrock takes only from the regions of its geography, but Config.Region is %q: use a profile of that region's geography, or a client and Config.Region in the profile's",
				p.Name(), model, prefix, p.region)
		}
	}
	return d, nil
}

// bedrockModelRegion returns the region a Bedrock model ARN names
// (arn:partition:bedrock:region:account:resource), or the prefix of a
// cross-region inference profile id ("eu" of "eu.anthropic.…"), or
// neither.
func bedrockModelRegion(model string) (region, prefix string) {
	m := strings.ToLower(strings.TrimSpace(model))
	if strings.HasPrefix(m, "arn:") {
		parts := strings.SplitN(m, ":", 6)
		if len(parts) == 6 && parts[2] == "bedrock" {
			return parts[3], ""
		}
		return "", ""
	}
	if p, _, ok := strings.Cut(m, "."); ok {
		if _, known := profileRegions[p]; known {
			return "", p
		}
	}
	return "", ""
}

// profileRegions are, by cross-region inference profile prefix, the
// prefixes of the regions Bedrock takes it from ("" for every region).
var profileRegions = map[string][]string{
	"global": {""},
	"us":     {"us-east-", "us-west-"},
	"us-gov": {"us-gov-"},
	"eu":     {"eu-"},
	"apac":   {"ap-"},
	"jp":     {"ap-northeast-1", "ap-northeast-3"},
	"au":     {"ap-southeast-2", "ap-southeast-4"},
	"ca":     {"ca-"},
}

// profileTakes reports whether Bedrock takes a profile of prefix from
// region.
func profileTakes(prefix, region string) bool {
	region = strings.ToLower(region)
	for _, r := range profileRegions[prefix] {
		if strings.HasPrefix(region, r) {
			return true
		}
	}
	return false
}

// sentRegion returns the region request r shows it goes to, "" when it
// shows none: on Bedrock the region of its SigV4 credential scope
// (Credential=AKID/date/region/bedrock/aws4_request), else the label after
// bedrock-runtime in its host (bedrock-runtime.eu-west-1.amazonaws.com, a
// VPC endpoint's …bedrock-runtime.eu-west-1.vpce.amazonaws.com); on Vertex
// the location of its path (/v1/projects/p/locations/europe-west4/…). A
// request sent with a bearer token to a URL of one's own shows none.
func (p *Provider) sentRegion(r *http.Request) string {
	switch p.platform {
	case PlatformBedrock:
		if scope := sigV4Region(r.Header.Get("Authorization")); scope != "" {
			return scope
		}
		labels := strings.Split(strings.ToLower(r.URL.Hostname()), ".")
		for i, l := range labels {
			if strings.HasPrefix(l, "bedrock-runtime") && i+1 < len(labels) && strings.Count(labels[i+1], "-") >= 2 {
				return labels[i+1]
			}
		}
	case PlatformVertex:
		if _, rest, ok := strings.Cut(r.URL.Path, "/locations/"); ok {
			loc, _, _ := strings.Cut(rest, "/")
			return loc
		}
	}
	return ""
}

// sigV4Region returns the region of an AWS SigV4 Authorization header's
// credential scope, "" for any other header.
func sigV4Region(auth string) string {
	scheme, rest, ok := strings.Cut(auth, " ")
	if !ok || !strings.HasPrefix(strings.ToUpper(scheme), "AWS4-") {
		return ""
	}
	for _, kv := range strings.Split(rest, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(kv), "Credential="); ok {
			if parts := strings.Split(v, "/"); len(parts) == 5 {
				return parts[2]
			}
		}
	}
	return ""
}

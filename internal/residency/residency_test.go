package residency_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/internal/residency"
	"github.com/backstop-llm/backstop/llm"
)

// deployed is an llm.DeployedProvider: a provider that says where it is
// deployed, or panics when asked (oops).
type deployed struct {
	dep  llm.Deployment
	oops bool
}

func (d *deployed) Name() string { return "aws.bedrock" }
func (d *deployed) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: "ok"}, nil
}
func (d *deployed) Deployment() llm.Deployment {
	if d.oops {
		panic("no deployment")
	}
	return d.dep
}

// plain is an llm.Provider that does not say where it is deployed.
type plain struct{}

func (plain) Name() string { return "x" }
func (plain) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: "ok"}, nil
}

// modelDeployed is an llm.ModelDeployedProvider: the region of a model
// named "in:<region>" is that region; ModelDeployment fails for a region
// other than its own, and panics for the model "oops".
type modelDeployed struct{ deployed }

func (m *modelDeployed) ModelDeployment(model string) (llm.Deployment, error) {
	if model == "oops" {
		panic("no model deployment")
	}
	d := m.dep
	if r, ok := strings.CutPrefix(model, "in:"); ok {
		d.Region = r
		if r != m.dep.Region {
			return d, fmt.Errorf("model %q is served in %s, not in %s", model, r, m.dep.Region)
		}
	}
	return d, nil
}

// at is a provider deployed in region.
func at(region string) *deployed {
	return &deployed{dep: llm.Deployment{Platform: "bedrock", Region: region}}
}

// allGeographies is every geography of the table.
var allGeographies = []string{"eu", "uk", "ch", "us", "ca", "sa", "apac", "me", "af"}

// TestCheck checks where allowed lets a target process data: its Region,
// else where its provider serves its Model, else its provider's
// deployment; a geography entry holding the region; a Bedrock profile by
// where it routes; and that each refusal says what to change.
func TestCheck(t *testing.T) {
	const euProfile = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
	const globalProfile = "global.anthropic.claude-sonnet-4-5-20250929-v1:0"
	served := &modelDeployed{deployed{dep: llm.Deployment{Platform: "bedrock", Region: "eu-west-1"}}}
	for _, tc := range []struct {
		name    string
		allowed []string
		where   residency.Where
		want    string // "" for success
	}{
		{"nothing allowed is no restriction", nil, residency.Where{Model: globalProfile}, ""},
		{"provider's region in the geography", []string{"eu"}, residency.Where{Provider: at("eu-west-1"), Model: "m"}, ""},
		{"provider's region outside", []string{"eu"}, residency.Where{Provider: at("us-east-1"), Model: "m"},
			`Region "us-east-1" (its provider's deployment, geography "us") is outside the allowed regions ["eu"]; remove the target or allow its region`},
		{"explicit Region wins, inside", []string{"eu"}, residency.Where{Provider: at("us-east-1"), Model: "m", Region: "eu-west-1"}, ""},
		{"explicit Region wins, outside", []string{"eu"}, residency.Where{Provider: at("eu-west-1"), Model: "m", Region: "us-east-1"},
			`Region "us-east-1" (geography "us") is outside the allowed regions ["eu"]`},
		{"region entry", []string{"eu-west-1"}, residency.Where{Provider: at("eu-west-1"), Model: "m"}, ""},
		{"another region entry", []string{"eu-central-1"}, residency.Where{Provider: at("eu-west-1"), Model: "m"},
			`Region "eu-west-1" (its provider's deployment, geography "eu") is outside the allowed regions ["eu-central-1"]`},
		{"a geography region is not a region entry", []string{"eu-west-1"}, residency.Where{Region: "eu"},
			`Region "eu" is outside the allowed regions ["eu-west-1"]`},
		{"case and spaces do not matter", []string{" EU "}, residency.Where{Region: "EU-West-1"}, ""},
		{"GCP europe", []string{"eu"}, residency.Where{Region: "europe-west4"}, ""},
		{"GCP london is uk", []string{"eu"}, residency.Where{Region: "europe-west2"}, `Region "europe-west2" (geography "uk") is outside`},
		{"GCP zurich is ch", []string{"eu"}, residency.Where{Region: "europe-west6"}, `geography "ch"`},
		{"AWS london is uk", []string{"eu"}, residency.Where{Provider: at("eu-west-2")}, `geography "uk"`},
		{"uk entry", []string{"uk"}, residency.Where{Provider: at("eu-west-2")}, ""},
		{"eu and uk", []string{"eu", "uk"}, residency.Where{Region: "eu-west-2"}, ""},
		{"AWS zurich is ch", []string{"eu"}, residency.Where{Provider: at("eu-central-2")}, `geography "ch"`},
		{"azure westeurope", []string{"eu"}, residency.Where{Provider: &deployed{dep: llm.Deployment{Region: "westeurope"}}}, ""},
		{"azure swedencentral", []string{"eu"}, residency.Where{Region: "swedencentral"}, ""},
		{"azure uksouth", []string{"eu"}, residency.Where{Region: "uksouth"}, `geography "uk"`},
		{"azure eastus", []string{"us"}, residency.Where{Region: "eastus2"}, ""},
		{"AWS govcloud", []string{"us"}, residency.Where{Provider: at("us-gov-west-1")}, ""},
		{"AWS tokyo", []string{"apac"}, residency.Where{Provider: at("ap-northeast-1")}, ""},
		{"AWS israel is me", []string{"me"}, residency.Where{Region: "il-central-1"}, ""},
		{"GCP sydney", []string{"apac"}, residency.Where{Region: "australia-southeast1"}, ""},
		{"GCP montreal", []string{"ca"}, residency.Where{Region: "northamerica-northeast1"}, ""},
		{"GCP johannesburg", []string{"af"}, residency.Where{Region: "africa-south1"}, ""},
		{"unlisted region", []string{"us"}, residency.Where{Provider: at("mx-central-1")},
			`Region "mx-central-1" (its provider's deployment) is outside the allowed regions ["us"]`},
		{"unlisted region named", []string{"mx-central-1"}, residency.Where{Provider: at("mx-central-1")}, ""},
		{"no region anywhere", []string{"eu"}, residency.Where{Provider: plain{}, Model: "m"},
			`Region is empty and its provider does not say where it is deployed, but the chain allows only regions ["eu"]; set the target's Region`},
		{"no provider", []string{"eu"}, residency.Where{Model: "m"}, `Region is empty`},
		{"provider without a region", []string{"eu"}, residency.Where{Provider: at("")}, `Region is empty`},
		{"Deployment panics", []string{"eu"}, residency.Where{Provider: &deployed{oops: true}},
			`Provider.Deployment panicked (no deployment); set the target's Region`},
		{"where the provider serves the model", []string{"eu-west-1"}, residency.Where{Provider: served, Model: "in:eu-west-1"}, ""},
		{"where the provider serves the model, outside", []string{"us"}, residency.Where{Provider: served, Model: "in:eu-west-1"},
			`Region "eu-west-1" (where its provider serves its Model, geography "eu") is outside the allowed regions ["us"]`},
		{"a model served elsewhere is judged there", []string{"eu"}, residency.Where{Provider: served, Model: "in:us-east-1"},
			`Region "us-east-1" (where its provider serves its Model, geography "us")`},
		{"ModelDeployment panics: the deployment", []string{"eu"}, residency.Where{Provider: served, Model: "oops"}, ""},
		{"eu profile from a us client", []string{"eu"}, residency.Where{Provider: at("us-east-1"), Model: euProfile}, ""},
		{"eu profile whatever Region says", []string{"eu"}, residency.Where{Region: "us-east-1", Model: euProfile}, ""},
		{"eu profile ARN", []string{"eu"}, residency.Where{Provider: at("eu-west-1"),
			Model: "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/" + euProfile}, ""},
		{"eu profile, one region allowed", []string{"eu-west-1"}, residency.Where{Model: euProfile, Region: "eu-west-1"},
			`Model "eu.anthropic.claude-sonnet-4-5-20250929-v1:0" is an eu. inference profile, which routes anywhere in geography "eu", outside the allowed regions ["eu-west-1"]; allow "eu", or use a profile or model id inside them`},
		{"us profile from an eu client", []string{"eu"}, residency.Where{Provider: at("eu-west-1"), Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
			`is a us. inference profile, which routes anywhere in geography "us", outside the allowed regions ["eu"]`},
		{"us-gov profile is us", []string{"us"}, residency.Where{Model: "us-gov.anthropic.claude-sonnet-4-5-20250929-v1:0"}, ""},
		{"apac profile", []string{"apac"}, residency.Where{Model: "apac.anthropic.claude-sonnet-4-5-20250929-v1:0"}, ""},
		{"jp profile is apac", []string{"jp"}, residency.Where{Model: "jp.anthropic.claude-sonnet-4-5-20250929-v1:0"},
			`is a jp. inference profile, which routes anywhere in geography "apac"`},
		{"global profile", []string{"eu"}, residency.Where{Provider: at("eu-west-1"), Model: globalProfile},
			`Model "global.anthropic.claude-sonnet-4-5-20250929-v1:0" is outside the allowed regions ["eu"]: global. inference profiles route worldwide; use an eu. profile`},
		{"global profile, us allowed", []string{"us-east-1", "us"}, residency.Where{Model: globalProfile, Region: "us-east-1"},
			`global. inference profiles route worldwide; use a us. profile`},
		{"global profile, regions allowed", []string{"eu-west-1"}, residency.Where{Model: globalProfile},
			`global. inference profiles route worldwide; use a model id or inference profile inside them`},
		{"global profile, all but one geography", allGeographies[1:], residency.Where{Model: globalProfile},
			`global. inference profiles route worldwide`},
		{"global profile, every geography", allGeographies, residency.Where{Model: globalProfile}, ""},
		{"a deployment name is no profile", []string{"eu"}, residency.Where{Provider: at("westeurope"), Model: "us.gpt-4.1"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := residency.Check(tc.allowed, tc.where)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Check refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("Check allowed; want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("Check error lacks %q; got %v", tc.want, err)
			}
		})
	}
}

// TestServed checks that Served returns what a provider says against a
// model (llm.ModelDeployedProvider), its panic as an error, and nothing for
// a provider that does not say.
func TestServed(t *testing.T) {
	served := &modelDeployed{deployed{dep: llm.Deployment{Platform: "bedrock", Region: "eu-west-1"}}}
	for _, tc := range []struct {
		name  string
		p     llm.Provider
		model string
		want  string // "" for nil
	}{
		{"agrees", served, "in:eu-west-1", ""},
		{"names nothing", served, "m", ""},
		{"no model", served, "", ""},
		{"contradicts", served, "in:us-east-1", `model "in:us-east-1" is served in us-east-1, not in eu-west-1`},
		{"panics", served, "oops", "ModelDeployment panicked: no model deployment"},
		{"does not say", at("us-east-1"), "in:us-east-1", ""},
		{"plain", plain{}, "m", ""},
		{"nil", nil, "m", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := residency.Served(tc.p, tc.model)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Served = %v, want nil", err)
			case tc.want != "" && (err == nil || err.Error() != tc.want):
				t.Errorf("Served = %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzCheck feeds Check arbitrary regions, entries and model ids (all from
// the user's configuration): it never panics, allows everything when
// nothing is restricted, allows a region listed as itself, allows a region
// under every geography unless it is a profile or an unlisted region, and
// says what to change when it refuses.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"eu-west-1", "europe-west2", "westeurope", "EU", " us ", "mx-central-1", "", "eu-",
		"northamerica-northeast1", "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", "global.amazon.nova-pro-v1:0",
		"arn:aws:bedrock:eu-west-1:1:inference-profile/us-gov.anthropic.claude-x", "us.gpt-4.1"} {
		f.Add(s, s, "m")
		f.Add(s, "eu", s)
	}
	f.Fuzz(func(t *testing.T, region, entry, model string) {
		w := residency.Where{Model: model, Region: region}
		if err := residency.Check(nil, w); err != nil {
			t.Errorf("Check(nil, %+v) = %v, want nil", w, err)
		}
		err := residency.Check([]string{entry}, w)
		if err != nil && !strings.Contains(err.Error(), "; ") {
			t.Errorf("Check([%q], %+v) = %v: says nothing to change", entry, w, err)
		}
		if residency.Check(allGeographies, residency.Where{Model: model}) == nil {
			// Only a profile is allowed without a region: its geography is where it routes.
			if !strings.Contains(model, ".") {
				t.Errorf("Check(every geography, Model %q, no Region) allowed a target of unknown region", model)
			}
		}
		if region == "" || strings.Contains(model, ".") {
			return
		}
		if err := residency.Check([]string{region}, residency.Where{Model: "m", Region: region}); err != nil {
			t.Errorf("Check([%q], Region %q) = %v, want nil", region, region, err)
		}
		if err := residency.Check([]string{strings.ToUpper(region)}, residency.Where{Model: "m", Region: region}); err != nil && isASCII(region) {
			t.Errorf("Check([%q], Region %q) = %v, want nil", strings.ToUpper(region), region, err)
		}
	})
}

// isASCII reports whether s holds only ASCII.
func isASCII(s string) bool {
	for _, c := range []byte(s) {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

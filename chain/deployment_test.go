package chain_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
)

// deployed is an llm.DeployedProvider that answers "ok" without a network:
// a provider that says where it is deployed.
type deployed struct {
	name string
	dep  llm.Deployment
	oops bool // Deployment panics
}

func (d *deployed) Name() string { return d.name }
func (d *deployed) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: "ok", Model: req.Model}, nil
}
func (d *deployed) Deployment() llm.Deployment {
	if d.oops {
		panic("no deployment")
	}
	return d.dep
}

// plain is an llm.Provider that does not say where it is deployed.
type plain struct{ name string }

func (p *plain) Name() string { return p.name }
func (p *plain) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: "ok", Model: req.Model}, nil
}

// wantBuildErr builds b and fails the test unless Build succeeds (want
// "") or fails saying want.
func wantBuildErr(t *testing.T, b *chain.Builder, want string) {
	t.Helper()
	msg := buildErr(t, b)
	switch {
	case want == "" && msg != "":
		t.Errorf("Build failed:\n%s", msg)
	case want != "" && !strings.Contains(msg, want):
		t.Errorf("Build error lacks %q; got:\n%s", want, msg)
	}
}

// buildErr builds b and returns its error's text, "" when Build succeeds,
// failing the test when an error does not match llm.ErrInvalidConfig.
func buildErr(t *testing.T, b *chain.Builder) string {
	t.Helper()
	c, err := b.Build()
	if err == nil {
		if c == nil {
			t.Fatal("Build returned neither a chain nor an error")
		}
		return ""
	}
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("Build error does not match llm.ErrInvalidConfig: %v", err)
	}
	return err.Error()
}

const sonnet45 = "claude-sonnet-4-5-20250929"

// TestModelIdentity checks that Build's tiers follow the model identity
// rule (internal/modelid): each pair is tried as Primary and OrDeployment
// (accepted when the same model, refused otherwise) and as Primary and
// OrSibling (the reverse).
func TestModelIdentity(t *testing.T) {
	for _, tc := range []struct {
		primary, other string
		same           bool
	}{
		// The rule itself is internal/modelid's (TestSame there); these
		// check that tiers follow it.
		{sonnet45, "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{sonnet45, "claude-sonnet-4-5@20250929", true},
		{"claude-sonnet-4-5", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", true},
		{"gpt-4o", "gpt-4o-2024-08-06", true},
		{sonnet45, "claude-sonnet-4-5-20250514", false},
		{"gpt-4o", "gpt-4o-mini", false},
		{"my-gpt-eu", "gpt-4o", false},
	} {
		t.Run(tc.primary+"|"+tc.other, func(t *testing.T) {
			a, b := &plain{name: "anthropic"}, &plain{name: "aws.bedrock"}
			msg := buildErr(t, chain.New("c").
				Primary(chain.Target{Name: "p", Provider: a, Model: tc.primary}).
				OrDeployment(chain.Target{Name: "d", Provider: b, Model: tc.other}))
			refused := fmt.Sprintf(`target "d": OrDeployment serves model %q but the primary serves %q; another deployment serves the same model`, tc.other, tc.primary)
			switch {
			case tc.same && msg != "":
				t.Errorf("OrDeployment of the same model refused:\n%s", msg)
			case !tc.same && !strings.Contains(msg, refused):
				t.Errorf("OrDeployment of another model: want %q, got:\n%s", refused, msg)
			}
			msg = buildErr(t, chain.New("c").
				Primary(chain.Target{Name: "p", Provider: a, Model: tc.primary}).
				OrSibling(chain.Target{Name: "s", Provider: a, Model: tc.other}))
			refused = fmt.Sprintf(`target "s": OrSibling serves the primary's model %q`, tc.other)
			switch {
			case tc.same && !strings.Contains(msg, refused):
				t.Errorf("OrSibling of the same model: want %q, got:\n%s", refused, msg)
			case !tc.same && msg != "":
				t.Errorf("OrSibling of another model refused:\n%s", msg)
			}
		})
	}
}

// TestServesDeclaresTheModel checks that tiers compare Serves when set, and
// that a Serves contradicting a Model that is itself a model id fails.
func TestServesDeclaresTheModel(t *testing.T) {
	openai := &plain{name: "openai"}
	azure := &deployed{name: "azure", dep: llm.Deployment{Platform: "azure", Region: "westeurope"}}
	for _, tc := range []struct {
		name    string
		primary chain.Target
		tier    string // "deployment" or "sibling"
		other   chain.Target
		want    string // "" for success
	}{
		{"azure deployment of the primary's model", chain.Target{Provider: openai, Model: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "my-gpt-eu", Serves: "gpt-4o"}, ""},
		{"azure name without Serves", chain.Target{Provider: openai, Model: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "my-gpt-eu"},
			`target "o": OrDeployment serves model "my-gpt-eu" but the primary serves "gpt-4o"`},
		{"azure deployment of another model", chain.Target{Provider: openai, Model: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "my-gpt-eu", Serves: "gpt-4o-mini"},
			`target "o": OrDeployment serves model "my-gpt-eu" (Serves "gpt-4o-mini") but the primary serves "gpt-4o"`},
		{"primary's Serves", chain.Target{Provider: azure, Model: "prod", Serves: "GPT-4o"},
			"deployment", chain.Target{Provider: openai, Model: "gpt-4o"}, ""},
		{"both named", chain.Target{Provider: azure, Model: "prod-eu", Serves: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "prod-us", Serves: "gpt-4o"}, ""},
		{"sibling by Serves", chain.Target{Provider: azure, Model: "prod", Serves: "gpt-4o"},
			"sibling", chain.Target{Provider: azure, Model: "small", Serves: "gpt-4o-mini"}, ""},
		{"sibling serving the primary's model", chain.Target{Provider: azure, Model: "prod", Serves: "gpt-4o"},
			"sibling", chain.Target{Provider: azure, Model: "spare", Serves: "gpt-4o"},
			`target "o": OrSibling serves the primary's model "spare" (Serves "gpt-4o") (the primary: "prod" (Serves "gpt-4o"))`},
		{"a deployment name that starts like a model id", chain.Target{Provider: openai, Model: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "gpt-eu", Serves: "gpt-4o"}, ""},
		{"a deployment named after its model", chain.Target{Provider: openai, Model: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "gpt-4o-prod", Serves: "gpt-4o"}, ""},
		{"a dated snapshot serving its model", chain.Target{Provider: openai, Model: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "gpt-4o-2024-08-06", Serves: "gpt-4o"}, ""},
		{"a dated mini snapshot serving mini", chain.Target{Provider: openai, Model: "gpt-4o-mini"},
			"deployment", chain.Target{Provider: azure, Model: "gpt-4o-mini-2024-07-18", Serves: "gpt-4o-mini"}, ""},
		{"a deployment named after its model, mini", chain.Target{Provider: openai, Model: "gpt-4o-mini"},
			"deployment", chain.Target{Provider: azure, Model: "gpt-4o-mini-prod", Serves: "gpt-4o-mini"}, ""},
		{"mini is not gpt-4o", chain.Target{Provider: openai, Model: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "gpt-4o-mini", Serves: "gpt-4o"},
			`target "o": Serves is "gpt-4o" but Model "gpt-4o-mini" is itself a model id, of another model`},
		{"a mini snapshot is not gpt-4o", chain.Target{Provider: openai, Model: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "gpt-4o-mini-2024-07-18", Serves: "gpt-4o"},
			`target "o": Serves is "gpt-4o" but Model "gpt-4o-mini-2024-07-18" is itself a model id, of another model`},
		{"a deployment named after mini is not gpt-4o", chain.Target{Provider: openai, Model: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "gpt-4o-mini-prod", Serves: "gpt-4o"},
			`target "o": Serves is "gpt-4o" but Model "gpt-4o-mini-prod" is itself a model id, of another model`},
		{"o3-mini is not o3", chain.Target{Provider: openai, Model: "o3"},
			"deployment", chain.Target{Provider: azure, Model: "o3-mini", Serves: "o3"},
			`target "o": Serves is "o3" but Model "o3-mini" is itself a model id, of another model`},
		{"flash-lite is not flash", chain.Target{Provider: openai, Model: "gemini-2.0-flash"},
			"deployment", chain.Target{Provider: azure, Model: "gemini-2.0-flash-lite-001", Serves: "gemini-2.0-flash"},
			`target "o": Serves is "gemini-2.0-flash" but Model "gemini-2.0-flash-lite-001" is itself a model id, of another model`},
		{"sonnet 4.5 is not sonnet 4", chain.Target{Provider: openai, Model: "claude-sonnet-4"},
			"deployment", chain.Target{Provider: azure, Model: sonnet45, Serves: "claude-sonnet-4"},
			`target "o": Serves is "claude-sonnet-4" but Model "claude-sonnet-4-5-20250929" is itself a model id, of another model`},
		{"a sonnet 4.5 profile is not sonnet 4", chain.Target{Provider: openai, Model: "claude-sonnet-4"},
			"deployment", chain.Target{Provider: azure, Model: "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", Serves: "eu.anthropic.claude-sonnet-4"},
			`target "o": Serves is "eu.anthropic.claude-sonnet-4" but Model "eu.anthropic.claude-sonnet-4-5-20250929-v1:0" is itself a model id, of another model`},
		{"consistent Serves on a model id", chain.Target{Provider: openai, Model: sonnet45},
			"deployment", chain.Target{Provider: openai, Model: "eu.anthropic.claude-sonnet-4-5-20250929-v1:0", Serves: "claude-sonnet-4-5"}, ""},
		{"wrong Serves on a GPT id", chain.Target{Provider: openai, Model: "gpt-4o"},
			"deployment", chain.Target{Provider: azure, Model: "gpt-4o", Serves: "gpt-4.1"},
			`target "o": Serves is "gpt-4.1" but Model "gpt-4o" is itself a model id, of another model`},
		{"wrong Serves on a Bedrock profile", chain.Target{Provider: openai, Model: sonnet45},
			"sibling", chain.Target{Provider: openai, Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0", Serves: "claude-haiku-4-5"},
			`target "o": Serves is "claude-haiku-4-5" but Model "us.anthropic.claude-sonnet-4-5-20250929-v1:0" is itself a model id, of another model`},
		{"wrong Serves on an o-series id", chain.Target{Provider: openai, Model: "gpt-4o"},
			"sibling", chain.Target{Provider: openai, Model: "o3", Serves: "o4-mini"},
			`target "o": Serves is "o4-mini" but Model "o3" is itself a model id`},
		{"wrong Serves on a Gemini id", chain.Target{Provider: openai, Model: "gpt-4o"},
			"sibling", chain.Target{Provider: openai, Model: "models/gemini-2.5-pro", Serves: "gemini-2.5-flash"},
			`target "o": Serves is "gemini-2.5-flash" but Model "models/gemini-2.5-pro" is itself a model id`},
		{"wrong Serves on the primary", chain.Target{Provider: openai, Model: sonnet45, Serves: "claude-opus-4-1"},
			"sibling", chain.Target{Provider: openai, Model: "claude-haiku-4-5"},
			`target "p": Serves is "claude-opus-4-1" but Model "claude-sonnet-4-5-20250929" is itself a model id`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.primary.Name, tc.other.Name = "p", "o"
			b := chain.New("c").Primary(tc.primary)
			if tc.tier == "sibling" {
				b.OrSibling(tc.other)
			} else {
				b.OrDeployment(tc.other)
			}
			wantBuildErr(t, b, tc.want)
		})
	}
}

// TestServesOnANameIsNotChecked checks that any Serves is taken on trust
// when Model is not a recognisable model id.
func TestServesOnANameIsNotChecked(t *testing.T) {
	for _, model := range []string{"my-gpt-eu", "prod", "arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/a1b2c3"} {
		msg := buildErr(t, chain.New("c").Primary(chain.Target{Name: "p", Provider: &plain{name: "x"}, Model: model, Serves: sonnet45}))
		if msg != "" {
			t.Errorf("Model %q with Serves: %s", model, msg)
		}
	}
}

// TestResidency checks, through Build, where AllowRegions lets a target
// process data: its Region, else its provider's deployment; a geography
// entry holding the region; a Bedrock profile by where it routes.
func TestResidency(t *testing.T) {
	at := func(region string) *deployed {
		return &deployed{name: "aws.bedrock", dep: llm.Deployment{Platform: "bedrock", Region: region}}
	}
	const euProfile = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
	const globalProfile = "global.anthropic.claude-sonnet-4-5-20250929-v1:0"
	for _, tc := range []struct {
		name    string
		allowed []string
		target  chain.Target
		want    string // "" for success
	}{
		// The geography table and the profile rules are package
		// residency's (TestCheck there); these check that Build asks it for
		// every model target, with its Region, Model and Provider, and
		// reports its refusal under the target's name.
		{"provider's region in the geography", []string{"eu"}, chain.Target{Provider: at("eu-west-1"), Model: "m"}, ""},
		{"provider's region outside", []string{"eu"}, chain.Target{Provider: at("us-east-1"), Model: "m"},
			`target "t": Region "us-east-1" (its provider's deployment, geography "us") is outside the allowed regions ["eu"]; remove the target or allow its region`},
		{"explicit Region wins, inside", []string{"eu"}, chain.Target{Provider: at("us-east-1"), Model: "m", Region: "eu-west-1"}, ""},
		{"explicit Region wins, outside", []string{"eu"}, chain.Target{Provider: at("eu-west-1"), Model: "m", Region: "us-east-1"},
			`target "t": Region "us-east-1" (geography "us") is outside the allowed regions ["eu"]`},
		{"case does not matter", []string{"EU"}, chain.Target{Provider: &plain{name: "x"}, Model: "m", Region: "EU-West-1"}, ""},
		{"AWS london is uk", []string{"eu"}, chain.Target{Provider: at("eu-west-2"), Model: "m"}, `geography "uk"`},
		{"no region anywhere", []string{"eu"}, chain.Target{Provider: &plain{name: "x"}, Model: "m"},
			`target "t": Region is empty and its provider does not say where it is deployed, but the chain allows only regions ["eu"]; set the target's Region`},
		{"Deployment panics", []string{"eu"}, chain.Target{Provider: &deployed{name: "x", oops: true}, Model: "m"},
			`target "t": Provider.Deployment panicked (no deployment)`},
		{"eu profile from a us client", []string{"eu"}, chain.Target{Provider: at("us-east-1"), Model: euProfile}, ""},
		{"eu profile, one region allowed", []string{"eu-west-1"}, chain.Target{Provider: at("eu-west-1"), Model: euProfile, Region: "eu-west-1"},
			`target "t": Model "eu.anthropic.claude-sonnet-4-5-20250929-v1:0" is an eu. inference profile, which routes anywhere in geography "eu", outside the allowed regions ["eu-west-1"]`},
		{"global profile", []string{"eu"}, chain.Target{Provider: at("eu-west-1"), Model: globalProfile},
			`target "t": Model "global.anthropic.claude-sonnet-4-5-20250929-v1:0" is outside the allowed regions ["eu"]: global. inference profiles route worldwide; use an eu. profile`},
		{"global profile, every geography", []string{"eu", "uk", "ch", "us", "ca", "sa", "apac", "me", "af"},
			chain.Target{Provider: at("eu-west-1"), Model: globalProfile}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.target.Name = "t"
			wantBuildErr(t, chain.New("c").AllowRegions(tc.allowed...).Primary(tc.target).
				OrDegrade(degrade.Static(llm.Response{Text: "busy"})), tc.want)
		})
	}
}

// TestNoRegionsNoResidencyCheck checks that without AllowRegions no target
// is refused for where it runs, a global. profile included.
func TestNoRegionsNoResidencyCheck(t *testing.T) {
	msg := buildErr(t, chain.New("c").
		Primary(chain.Target{Name: "p", Provider: &plain{name: "x"}, Model: "global.anthropic.claude-sonnet-4-5-20250929-v1:0"}).
		OrDeployment(chain.Target{Name: "d", Provider: &deployed{name: "y", oops: true}, Model: sonnet45}))
	if msg != "" {
		t.Fatal(msg)
	}
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

// TestModelDeployment checks that Build asks a provider that says where
// each model is served (llm.ModelDeployedProvider): a model it says
// contradicts its deployment fails Build with its error, with or without
// AllowRegions, and the region it gives is the one AllowRegions judges.
func TestModelDeployment(t *testing.T) {
	p := &modelDeployed{deployed{name: "aws.bedrock", dep: llm.Deployment{Platform: "bedrock", Region: "eu-west-1"}}}
	for _, tc := range []struct {
		name    string
		allowed []string
		model   string
		want    string
	}{
		{"agrees", nil, "in:eu-west-1", ""},
		{"names nothing", nil, "m", ""},
		{"contradicts", nil, "in:us-east-1", `target "t": Model is not served where its provider says it is deployed: model "in:us-east-1" is served in us-east-1, not in eu-west-1`},
		{"contradicts, with regions", []string{"eu"}, "in:us-east-1", "not in eu-west-1"},
		{"judged where served", []string{"eu-west-1"}, "in:eu-west-1", ""},
		{"judged where served, outside", []string{"us"}, "in:eu-west-1", `Region "eu-west-1" (where its provider serves its Model, geography "eu") is outside the allowed regions ["us"]`},
		{"panics", nil, "oops", "ModelDeployment panicked: no model deployment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantBuildErr(t, chain.New("c").AllowRegions(tc.allowed...).Primary(chain.Target{Name: "t", Provider: p, Model: tc.model}), tc.want)
		})
	}
}

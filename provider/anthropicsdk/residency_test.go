package anthropicsdk

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/bedrock"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/internal/suite"
)

// bedrockIn returns a provider over a Bedrock client built for region
// clientRegion, told (Config.Region) that it is in region, sending to url.
func bedrockIn(t *testing.T, url, clientRegion, region string) *Provider {
	t.Helper()
	t.Setenv("AWS_BEARER_TOKEN_BEDROCK", "")
	cfg := aws.Config{Region: clientRegion, Credentials: credentials.NewStaticCredentialsProvider(hostileAKID, hostileSecret, hostileSession)}
	client := anthropic.NewClient(bedrock.WithConfig(cfg), option.WithBaseURL(url))
	p, err := New(client, Config{Platform: PlatformBedrock, Region: region, HTTPClient: httpClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBedrockModelRegion: a Bedrock model that names where it is served (a
// model or inference-profile ARN its region, a cross-region profile id its
// geography) and contradicts Config.Region fails the chain's Build,
// naming both; one that agrees, or names nothing, builds.
func TestBedrockModelRegion(t *testing.T) {
	p := bedrockIn(t, "http://127.0.0.1:1", "eu-west-1", "eu-west-1")
	for _, tc := range []struct {
		model string
		bad   string // what the error names beside eu-west-1; "" when it builds
	}{
		{"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc", "us-east-1"},
		{"arn:aws:bedrock:eu-west-1:123456789012:application-inference-profile/abc", ""},
		{"arn:aws:bedrock:us-east-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0", "us-east-1"},
		{"arn:aws:bedrock:eu-west-1::foundation-model/anthropic.claude-3-haiku-20240307-v1:0", ""},
		{"arn:aws:bedrock:eu-central-1:123456789012:inference-profile/eu.anthropic.claude-sonnet-4-20250514-v1:0", "eu-central-1"},
		{"arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.anthropic.claude-sonnet-4-20250514-v1:0", ""},
		{"us.anthropic.claude-sonnet-4-20250514-v1:0", "us."},
		{"apac.anthropic.claude-sonnet-4-20250514-v1:0", "apac."},
		{"eu.anthropic.claude-sonnet-4-20250514-v1:0", ""},
		{"global.anthropic.claude-sonnet-4-20250514-v1:0", ""},
		{"anthropic.claude-3-haiku-20240307-v1:0", ""},
	} {
		_, err := chain.New("residency").Primary(chain.Target{Name: "t", Provider: p, Model: tc.model}).Build()
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("%s: %v", tc.model, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad) || !strings.Contains(err.Error(), `"eu-west-1"`)):
			t.Errorf("%s: Build = %v; want an error naming %s and eu-west-1", tc.model, err, tc.bad)
		}
	}
	// Where the data goes is the ARN's region, for AllowRegions too.
	us := bedrockIn(t, "http://127.0.0.1:1", "us-east-1", "us-east-1")
	arn := "arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc"
	if _, err := chain.New("r").AllowRegions("eu").Primary(chain.Target{Name: "t", Provider: us, Model: arn}).Build(); err == nil || !strings.Contains(err.Error(), "us-east-1") {
		t.Errorf("AllowRegions(eu) took a us-east-1 profile: %v", err)
	}
	if _, err := chain.New("r").AllowRegions("us").Primary(chain.Target{Name: "t", Provider: us, Model: arn}).Build(); err != nil {
		t.Errorf("AllowRegions(us): %v", err)
	}
	if d, err := us.ModelDeployment(arn); err != nil || d != (llm.Deployment{Platform: PlatformBedrock, Region: "us-east-1"}) {
		t.Errorf("ModelDeployment = %+v, %v", d, err)
	}
	if d, err := newProvider(t, "http://127.0.0.1:1").ModelDeployment("claude-test"); err != nil || d != (llm.Deployment{Platform: PlatformAnthropic}) {
		t.Errorf("the API's ModelDeployment = %+v, %v", d, err)
	}
}

// TestRegionOfTheRequest: a request that shows another region than
// Config.Region (Bedrock's SigV4 credential scope, Vertex's location in
// the path) is refused before it leaves, KindNotFound with Code "region"
// naming both: the client was built for another region than the provider
// reports to the chain.
func TestRegionOfTheRequest(t *testing.T) {
	s := suite.NewServer(t, suite.Respond(200, okBody, "Content-Type", "application/json"))
	creds := &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: hostileToken, TokenType: "Bearer"})}
	vc := anthropic.NewClient(vertex.WithCredentials(context.Background(), "europe-west4", "my-project", creds), option.WithBaseURL(s.URL))
	vp, err := New(vc, Config{Platform: PlatformVertex, Region: "us-central1", HTTPClient: httpClient(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p          *Provider
		model      string
		sent, told string
	}{
		{bedrockIn(t, s.URL, "us-east-1", "eu-west-1"), "anthropic.claude-3-haiku-20240307-v1:0", "us-east-1", "eu-west-1"},
		{vp, "claude-test@20260101", "europe-west4", "us-central1"},
	} {
		req := userReq
		req.Model = tc.model
		for _, stream := range []bool{false, true} {
			err := attempt(tc.p, req, stream)
			var e *llm.Error
			if !errors.As(err, &e) || e.Kind != llm.KindNotFound || e.Code != "region" ||
				!strings.Contains(e.Message, tc.sent) || !strings.Contains(e.Message, tc.told) {
				t.Errorf("%s: %v (%#v); want not_found, code region, naming %s and %s", tc.p.Name(), err, e, tc.sent, tc.told)
			}
		}
	}
	if n := s.Count.Load(); n != 0 {
		t.Errorf("%d requests left for the wrong region", n)
	}
	// The right region is sent.
	req := userReq
	req.Model = "anthropic.claude-3-haiku-20240307-v1:0"
	if _, err := bedrockIn(t, s.URL, "eu-west-1", "eu-west-1").Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
}

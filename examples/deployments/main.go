// Command deployments runs one chain across every deployment of a model,
// through the official SDKs' clients: Claude on the Anthropic API, the same
// model on AWS Bedrock (an eu. inference profile) and on Google Vertex AI
// (europe-west4), then GPT on Azure OpenAI (westeurope), then Gemini on
// Vertex AI, all under AllowRegions("eu"). It replays an incident on
// backstop's fake provider, which speaks each platform's wire format on
// loopback, and prints each call's path.
//
//	go -C examples/deployments run .
//
// It is a module of its own, so that the SDKs (anthropic-sdk-go with its
// Bedrock and Vertex packages, openai-go, google genai) stay out of
// backstop's go.mod.
package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/bedrock"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	gg "google.golang.org/genai"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropicsdk"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/genai"
	"github.com/backstop-llm/backstop/provider/openaisdk"
	"github.com/backstop-llm/backstop/retry"
)

// The model on each platform: the same Claude three ways, then GPT behind
// an Azure deployment of the user's own name, then Gemini.
const (
	claudeAPI     = "claude-sonnet-4-5-20250929"
	claudeBedrock = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
	claudeVertex  = "claude-sonnet-4-5@20250929"
	azureGPT      = "gpt-eu" // the Azure deployment's name
	gemini        = "gemini-2.5-pro"
)

func main() {
	log.SetFlags(0)
	s := fake.New()
	if err := s.Start(); err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.Region("eu-west-1") // the AWS region Bedrock requests must be signed for
	p, err := providers(s.URL())
	if err != nil {
		log.Fatal(err)
	}
	fast := retry.Policy{MaxAttempts: 2, Base: 50 * time.Millisecond, Pad: 50 * time.Millisecond}
	build := func(bedrockModel string) (*chain.Chain, error) {
		return chain.New("support-eu").AllowRegions("eu").Deadline(30 * time.Second).
			// The Anthropic API says no region: this one is declared (say, by
			// your contract's processing region).
			Primary(chain.Target{Name: "claude-api", Provider: p.api, Model: claudeAPI, Region: "eu", Retry: fast}).
			OrDeployment(chain.Target{Name: "claude-bedrock-eu", Provider: p.bedrock, Model: bedrockModel, Retry: fast}).
			OrDeployment(chain.Target{Name: "claude-vertex-eu", Provider: p.vertex, Model: claudeVertex, Retry: fast}).
			OrProvider(chain.Target{Name: "gpt-azure-eu", Provider: p.azure, Model: azureGPT, Serves: "gpt-4o", Retry: fast}).
			OrProvider(chain.Target{Name: "gemini-vertex-eu", Provider: p.gemini, Model: gemini, Retry: fast}).
			Build()
	}
	fmt.Println("A global. Bedrock profile routes worldwide, so an EU-only chain refuses it at Build:")
	if _, err := build("global.anthropic.claude-sonnet-4-5-20250929-v1:0"); err != nil {
		fmt.Println("  ", err)
	}
	c, err := build(claudeBedrock)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("\nThe same Claude on three platforms, then GPT on Azure, then Gemini, every one in the EU:")
	ctx := context.Background()
	steps := []struct {
		say    string
		script func()
	}{
		{"1. Healthy: the Anthropic API answers.", func() {
			s.Script(claudeAPI, fake.Answer("Your order left the warehouse."))
		}},
		{"2. The Anthropic API is overloaded: the same model on Bedrock answers.", func() {
			s.Script(claudeAPI, fake.Overloaded(), fake.Overloaded())
			s.Script(claudeBedrock, fake.Answer("Your order left the warehouse (Bedrock, eu)."))
		}},
		{"3. Bedrock throttles too: the same model on Vertex answers.", func() {
			s.Script(claudeAPI, fake.Overloaded(), fake.Overloaded())
			s.Script(claudeBedrock, fake.RateLimited("30"))
			s.Script(claudeVertex, fake.Answer("Your order left the warehouse (Vertex, europe-west4)."))
		}},
		{"4. Claude is down everywhere: GPT on Azure answers.", func() {
			s.Script(claudeAPI, fake.ServerError(), fake.ServerError())
			s.Script(claudeVertex, fake.Overloaded(), fake.Overloaded())
			s.Script(azureGPT, fake.Answer("Your order left the warehouse (Azure, westeurope)."))
		}},
		{"5. Azure is rate limited as well: Gemini answers.", func() {
			s.Script(claudeAPI, fake.ServerError(), fake.ServerError())
			s.Script(claudeVertex, fake.ServerError(), fake.ServerError())
			s.Script(azureGPT, fake.RateLimited("60"))
			s.Script(gemini, fake.Answer("Your order left the warehouse (Gemini, europe-west4)."))
		}},
	}
	for _, st := range steps {
		fmt.Println("\n" + st.say)
		st.script()
		res, err := c.Call(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}})
		for _, a := range res.Attempts {
			fmt.Println("   ", a)
		}
		if err != nil {
			fmt.Println("   failed:", err)
			continue
		}
		fmt.Printf("   => %s (%s, %s): %s\n", res.Served.Target, res.Served.Provider, res.Served.Model, res.Text)
	}
}

// platforms are the chain's providers, one per deployment, each over the
// official SDK's client for it, pointed at the fake.
type platforms struct{ api, bedrock, vertex, azure, gemini llm.Provider }

func providers(url string) (platforms, error) {
	var p platforms
	var err error
	// The Anthropic API.
	if p.api, err = anthropicsdk.New(anthropic.NewClient(aoption.WithAPIKey("fake-key"), aoption.WithBaseURL(url)), anthropicsdk.Config{}); err != nil {
		return p, err
	}
	// Bedrock: static credentials; a real program uses its AWS config.
	cfg := aws.Config{Region: "eu-west-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret", "")}
	if p.bedrock, err = anthropicsdk.New(anthropic.NewClient(bedrock.WithConfig(cfg), aoption.WithBaseURL(url)),
		anthropicsdk.Config{Platform: anthropicsdk.PlatformBedrock, Region: "eu-west-1"}); err != nil {
		return p, err
	}
	// Vertex: a static token; a real program uses Application Default Credentials.
	creds := &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "fake-token", TokenType: "Bearer"})}
	if p.vertex, err = anthropicsdk.New(anthropic.NewClient(vertex.WithCredentials(context.Background(), "europe-west4", "my-project", creds), aoption.WithBaseURL(url)),
		anthropicsdk.Config{Platform: anthropicsdk.PlatformVertex, Region: "europe-west4"}); err != nil {
		return p, err
	}
	// Azure OpenAI: the resource's endpoint and a key.
	if p.azure, err = openaisdk.New(openai.NewClient(azure.WithEndpoint(url, "2024-10-21"), azure.WithAPIKey("fake-azure-key"),
		azure.WithUnsafeAllowHTTP()), // the fake is on loopback; a real resource is https
		openaisdk.Config{Platform: openaisdk.PlatformAzure, Region: "westeurope"}); err != nil {
		return p, err
	}
	// Gemini on Vertex AI.
	gc, err := gg.NewClient(context.Background(), &gg.ClientConfig{Backend: gg.BackendVertexAI, Project: "my-project", Location: "europe-west4",
		HTTPClient: &http.Client{Transport: bearer{"fake-token"}}, HTTPOptions: gg.HTTPOptions{BaseURL: url, APIVersion: "v1"}})
	if err != nil {
		return p, err
	}
	p.gemini, err = genai.New(gc, genai.Config{})
	return p, err
}

// bearer adds a Vertex access token to each request, as an authenticating
// client from golang.org/x/oauth2 would.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

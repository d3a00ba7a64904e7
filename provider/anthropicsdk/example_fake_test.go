package anthropicsdk_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

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
	"github.com/backstop-llm/backstop/provider/anthropicsdk"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/retry"
)

// Testing a chain of your own against provider/fake, backstop's scriptable
// fake of the providers' APIs: the SDK client is pointed at the fake with
// option.WithBaseURL and needs no real key. Each model follows its script,
// one outcome per request: here the primary is overloaded (a 529), so the
// chain moves on to a sibling model, which answers.
func Example_fake() {
	s := fake.New()
	if err := s.Start(); err != nil { // a real server on 127.0.0.1, until Close
		log.Fatal(err)
	}
	defer s.Close()
	s.Script("claude-sonnet-4-5", fake.Overloaded())
	s.Script("claude-haiku-4-5", fake.Answer("Served by the fallback."))

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := anthropic.NewClient(
		option.WithAPIKey("sk-ant-fake"), // the fake wants a key, any key
		option.WithBaseURL(s.URL()),
		option.WithHTTPClient(&http.Client{Transport: tr}))
	p, err := anthropicsdk.New(client, anthropicsdk.Config{})
	if err != nil {
		log.Fatal(err)
	}

	c, err := chain.New("fake-test").
		// One attempt, so that the example does not wait out a backoff.
		Primary(chain.Target{Name: "sonnet", Provider: p, Model: "claude-sonnet-4-5", Retry: retry.Policy{MaxAttempts: 1}}).
		OrSibling(chain.Target{Name: "haiku", Provider: p, Model: "claude-haiku-4-5"}).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Call(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello!"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Served.Target, res.Text)
	for _, a := range res.Attempts {
		fmt.Println(a.Target, a.Status, a.Kind, a.Decision)
	}
	fmt.Println("requests to the primary:", s.Requests("claude-sonnet-4-5"))
	// Output:
	// haiku Served by the fallback.
	// sonnet 529 overloaded next
	// haiku 200 unknown served
	// requests to the primary: 1
}

// The fake also speaks Amazon Bedrock's and Google Vertex AI's wire
// formats, so one fake serves the three platforms' clients: the Anthropic
// API's (overloaded), Bedrock's (throttled) and Vertex AI's (which answers).
// Scripts are keyed by the model id as each platform names it. The Bedrock
// client signs with static credentials for the fake's region, which checks
// the signature's shape only; the Vertex client sends a static token.
func Example_fakePlatforms() {
	s := fake.New()
	if err := s.Start(); err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.Region("eu-west-1") // the region Bedrock requests must be signed for
	const (
		apiModel     = "claude-sonnet-4-5"
		bedrockModel = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
		vertexModel  = "claude-sonnet-4-5@20250929"
	)
	s.Script(apiModel, fake.Overloaded())
	s.Script(bedrockModel, fake.RateLimited("30"))
	s.Script(vertexModel, fake.Answer("Served by Vertex AI."))

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	newProvider := func(client anthropic.Client, opts anthropicsdk.Config) *anthropicsdk.Provider {
		p, err := anthropicsdk.New(client, opts)
		if err != nil {
			log.Fatal(err)
		}
		return p
	}

	// The HTTP client goes before the platform's option, which wraps it;
	// the base URL after, which replaces the platform's endpoint.
	api := newProvider(anthropic.NewClient(option.WithAPIKey("sk-ant-fake"), option.WithHTTPClient(hc),
		option.WithBaseURL(s.URL())), anthropicsdk.Config{})
	awsCfg := aws.Config{Region: "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDFAKE", "fake-secret-key", "")}
	onBedrock := newProvider(anthropic.NewClient(option.WithHTTPClient(hc), bedrock.WithConfig(awsCfg),
		option.WithBaseURL(s.URL())), anthropicsdk.Config{Platform: anthropicsdk.PlatformBedrock, Region: "eu-west-1"})
	token := &google.Credentials{TokenSource: oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "ya29.fake", TokenType: "Bearer"})}
	onVertex := newProvider(anthropic.NewClient(option.WithHTTPClient(hc),
		vertex.WithCredentials(context.Background(), "europe-west4", "my-project", token),
		option.WithBaseURL(s.URL())), anthropicsdk.Config{Platform: anthropicsdk.PlatformVertex, Region: "europe-west4"})

	one := retry.Policy{MaxAttempts: 1}
	c, err := chain.New("fake-platforms").
		Primary(chain.Target{Name: "api", Provider: api, Model: apiModel, Retry: one}).
		OrDeployment(chain.Target{Name: "bedrock", Provider: onBedrock, Model: bedrockModel, Retry: one}).
		OrDeployment(chain.Target{Name: "vertex", Provider: onVertex, Model: vertexModel}).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Call(context.Background(), llm.Request{
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello!"}},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Served.Target, res.Served.Provider, res.Text)
	for _, a := range res.Attempts {
		fmt.Println(a.Target, a.Status, a.Kind, a.Decision)
	}
	for _, m := range []string{apiModel, bedrockModel, vertexModel} {
		fmt.Println(m, s.Calls(m)[0].Format)
	}
	// Output:
	// vertex gcp.vertex_ai Served by Vertex AI.
	// api 529 overloaded next
	// bedrock 429 rate_limited next
	// vertex 200 unknown served
	// claude-sonnet-4-5 anthropic
	// eu.anthropic.claude-sonnet-4-5-20250929-v1:0 bedrock
	// claude-sonnet-4-5@20250929 vertex
}

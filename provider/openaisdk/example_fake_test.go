package openaisdk_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/openaisdk"
	"github.com/backstop-llm/backstop/retry"
)

// Testing a chain of your own against provider/fake, backstop's scriptable
// fake of the providers' APIs: the SDK client is pointed at the fake with
// option.WithBaseURL (the fake's URL and /v1) and needs no real key. Each
// model follows its script, one outcome per request: here the primary is
// overloaded (a 503), so the chain moves on to a sibling model, which
// answers. The fake serves Chat Completions, the adapter's default API.
func Example_fake() {
	s := fake.New()
	if err := s.Start(); err != nil { // a real server on 127.0.0.1, until Close
		log.Fatal(err)
	}
	defer s.Close()
	s.Script("gpt-5", fake.Overloaded())
	s.Script("gpt-5-mini", fake.Answer("Served by the fallback."))

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := openai.NewClient(
		option.WithAPIKey("sk-fake"), // the fake wants a key, any key
		option.WithBaseURL(s.URL()+"/v1"),
		option.WithHTTPClient(&http.Client{Transport: tr}))
	p, err := openaisdk.New(client, openaisdk.Config{})
	if err != nil {
		log.Fatal(err)
	}

	c, err := chain.New("fake-test").
		// One attempt, so that the example does not wait out a backoff.
		Primary(chain.Target{Name: "gpt-5", Provider: p, Model: "gpt-5", Retry: retry.Policy{MaxAttempts: 1}}).
		OrSibling(chain.Target{Name: "gpt-5-mini", Provider: p, Model: "gpt-5-mini"}).
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
	fmt.Println("requests to the primary:", s.Requests("gpt-5"))
	// Output:
	// gpt-5-mini Served by the fallback.
	// gpt-5 503 overloaded next
	// gpt-5-mini 200 unknown served
	// requests to the primary: 1
}

// The fake also speaks Azure OpenAI's wire format, so one fake serves both
// clients: OpenAI's (rate limited) and Azure's (which answers). The Azure
// client is pointed at the fake with azure.WithEndpoint, and
// azure.WithUnsafeAllowHTTP lets it send its key over the fake's plain
// HTTP. Azure scripts are keyed by the deployment name, which the target's
// Model names; Serves says which model the deployment serves.
func Example_fakeAzure() {
	s := fake.New()
	if err := s.Start(); err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.Script("gpt-4o", fake.RateLimited("30"))
	s.Script("my-gpt-4o", fake.Answer("Served by Azure OpenAI."))

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	onOpenAI, err := openaisdk.New(openai.NewClient(option.WithAPIKey("sk-fake"),
		option.WithBaseURL(s.URL()+"/v1"), option.WithHTTPClient(hc)), openaisdk.Config{})
	if err != nil {
		log.Fatal(err)
	}
	onAzure, err := openaisdk.New(openai.NewClient(azure.WithEndpoint(s.URL(), "2024-10-21"),
		azure.WithAPIKey("fake-azure-key"), azure.WithUnsafeAllowHTTP(), option.WithHTTPClient(hc)),
		openaisdk.Config{Platform: openaisdk.PlatformAzure, Region: "westeurope"})
	if err != nil {
		log.Fatal(err)
	}

	c, err := chain.New("fake-azure").
		Primary(chain.Target{Name: "openai", Provider: onOpenAI, Model: "gpt-4o", Retry: retry.Policy{MaxAttempts: 1}}).
		OrDeployment(chain.Target{Name: "azure", Provider: onAzure, Model: "my-gpt-4o", Serves: "gpt-4o"}).
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
	fmt.Println(s.Calls("gpt-4o")[0].Format, s.Calls("my-gpt-4o")[0].Format)
	// Output:
	// azure azure.ai.openai Served by Azure OpenAI.
	// openai 429 rate_limited next
	// azure 200 unknown served
	// openai azure
}

package genai_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"google.golang.org/genai"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	backstopgenai "github.com/backstop-llm/backstop/provider/genai"
	"github.com/backstop-llm/backstop/retry"
)

// Testing a chain of your own against provider/fake, backstop's scriptable
// fake of the providers' APIs: the genai client is pointed at the fake with
// HTTPOptions.BaseURL and needs no real key. Each model follows its
// script, one outcome per request: here the primary is overloaded (a 503
// UNAVAILABLE), so the chain moves on to a sibling model, which answers.
func Example_fake() {
	s := fake.New()
	if err := s.Start(); err != nil { // a real server on 127.0.0.1, until Close
		log.Fatal(err)
	}
	defer s.Close()
	s.Script("gemini-2.5-pro", fake.Overloaded())
	s.Script("gemini-2.5-flash", fake.Answer("Served by the fallback."))

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendGeminiAPI,
		APIKey:      "AIza-fake", // the fake wants a key, any key
		HTTPClient:  &http.Client{Transport: tr},
		HTTPOptions: genai.HTTPOptions{BaseURL: s.URL()},
	})
	if err != nil {
		log.Fatal(err)
	}
	p, err := backstopgenai.New(client, backstopgenai.Config{})
	if err != nil {
		log.Fatal(err)
	}

	c, err := chain.New("fake-test").
		// One attempt, so that the example does not wait out a backoff.
		Primary(chain.Target{Name: "pro", Provider: p, Model: "gemini-2.5-pro", Retry: retry.Policy{MaxAttempts: 1}}).
		OrSibling(chain.Target{Name: "flash", Provider: p, Model: "gemini-2.5-flash"}).
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
	fmt.Println("requests to the primary:", s.Requests("gemini-2.5-pro"))
	// Output:
	// flash Served by the fallback.
	// pro 503 overloaded next
	// flash 200 unknown served
	// requests to the primary: 1
}

// The fake also speaks Vertex AI's wire format, so one fake serves both
// backends: the Gemini API's client (rate limited) and Vertex AI's (which
// answers). The Vertex AI client is given an HTTP client, so it looks for
// no Google credentials, and a static bearer token in
// HTTPOptions.Headers. Both name the model alike, so one Handle answers
// for both, by the request's Format.
func Example_fakeVertex() {
	s := fake.New()
	if err := s.Start(); err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	s.Handle("gemini-2.5-flash", func(c fake.Call) fake.Outcome {
		if c.Format == fake.Gemini {
			return fake.RateLimited("30")
		}
		return fake.Answer("Served by Vertex AI.")
	})

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	onGemini, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:     genai.BackendGeminiAPI,
		APIKey:      "AIza-fake",
		HTTPClient:  hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: s.URL()},
	})
	if err != nil {
		log.Fatal(err)
	}
	onVertex, err := genai.NewClient(context.Background(), &genai.ClientConfig{
		Backend:    genai.BackendVertexAI,
		Project:    "my-project",
		Location:   "europe-west4",
		HTTPClient: hc,
		HTTPOptions: genai.HTTPOptions{BaseURL: s.URL(),
			Headers: http.Header{"Authorization": {"Bearer ya29.fake"}}},
	})
	if err != nil {
		log.Fatal(err)
	}
	gemini, err := backstopgenai.New(onGemini, backstopgenai.Config{})
	if err != nil {
		log.Fatal(err)
	}
	vertex, err := backstopgenai.New(onVertex, backstopgenai.Config{})
	if err != nil {
		log.Fatal(err)
	}

	c, err := chain.New("fake-vertex").
		Primary(chain.Target{Name: "gemini", Provider: gemini, Model: "gemini-2.5-flash", Retry: retry.Policy{MaxAttempts: 1}}).
		OrDeployment(chain.Target{Name: "vertex", Provider: vertex, Model: "gemini-2.5-flash"}).
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
	for _, call := range s.Calls("gemini-2.5-flash") {
		fmt.Println(call.Format)
	}
	// Output:
	// vertex gcp.vertex_ai Served by Vertex AI.
	// gemini 429 rate_limited next
	// vertex 200 unknown served
	// gemini
	// vertex-gemini
}

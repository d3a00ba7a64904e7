package openaisdk_test

import (
	"context"
	"fmt"
	"os"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/openaisdk"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"
)

// A provider over the client a program already builds, for OpenAI, Azure
// OpenAI and a compatible server (Groq). Each call makes one request
// whatever the client's retry setting.
func Example() {
	key := os.Getenv("OPENAI_API_KEY")
	openaiP, err := openaisdk.New(openai.NewClient(option.WithAPIKey(key)), openaisdk.Config{APIKey: key})
	if err != nil {
		panic(err)
	}

	azureKey := os.Getenv("AZURE_OPENAI_API_KEY")
	azureP, err := openaisdk.New(openai.NewClient(
		azure.WithEndpoint("https://my-resource.openai.azure.com", "2024-10-21"),
		azure.WithAPIKey(azureKey),
	), openaisdk.Config{Platform: openaisdk.PlatformAzure, Region: "westeurope", APIKey: azureKey})
	if err != nil {
		panic(err)
	}

	groqKey := os.Getenv("GROQ_API_KEY")
	groqP, err := openaisdk.New(openai.NewClient(
		option.WithBaseURL("https://api.groq.com/openai/v1"), option.WithAPIKey(groqKey),
	), openaisdk.Config{Platform: "groq", APIKey: groqKey})
	if err != nil {
		panic(err)
	}

	// The Responses API instead of Chat Completions.
	respP, err := openaisdk.New(openai.NewClient(option.WithAPIKey(key)), openaisdk.Config{API: openaisdk.APIResponses, APIKey: key})
	if err != nil {
		panic(err)
	}

	for _, p := range []*openaisdk.Provider{openaiP, azureP, groqP, respP} {
		fmt.Println(p.Name(), p.Deployment().Platform)
	}
	_ = func(ctx context.Context) (*llm.Response, error) {
		return openaiP.Complete(ctx, llm.Request{Model: "gpt-4o",
			Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hello"}}})
	}
	// Output:
	// openai openai
	// azure.ai.openai azure
	// groq groq
	// openai openai
}

package fake_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/backstop-llm/backstop/provider/fake"
)

// Bedrock's InvokeModel: the model id is in the path, the body has
// anthropic_version and no model, and the request needs a SigV4
// Authorization header whose credential scope names bedrock and the
// server's region (its signature is not verified). Here the model is
// throttled once, then answers.
func ExampleServer_bedrock() {
	s := fake.New()
	s.Region("eu-west-1")
	const model = "eu.anthropic.claude-sonnet-4-5-20250929-v1:0"
	s.Script(model, fake.RateLimited("2"), fake.Answer("Hello from Bedrock.").Usage(9, 4))

	for range 2 {
		req, err := http.NewRequest(http.MethodPost, s.URL()+"/model/"+model+"/invoke", strings.NewReader(
			`{"anthropic_version":"bedrock-2023-05-31","max_tokens":256,"messages":[{"role":"user","content":"Hi"}]}`))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Amz-Date", "20261201T120000Z")
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261201/eu-west-1/bedrock/aws4_request, "+
			"SignedHeaders=content-type;host;x-amz-date, Signature="+strings.Repeat("ab", 32))
		resp, err := s.Client().Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Println(resp.StatusCode, resp.Header.Get("x-amzn-ErrorType"), resp.Header.Get("Retry-After"), string(body))
			continue
		}
		fmt.Println(resp.StatusCode, string(body)[:strings.Index(string(body), `,"stop_reason"`)])
	}
	fmt.Println(s.Calls(model)[1].Format, s.Calls(model)[1].Header.Get("Authorization"))

	// Output:
	// 429 ThrottlingException 2 {"message":"Too many requests, please wait before trying again."}
	// 200 {"id":"msg_fake_2","type":"message","role":"assistant","model":"eu.anthropic.claude-sonnet-4-5-20250929-v1:0","content":[{"type":"text","text":"Hello from Bedrock.","citations":null}]
	// bedrock AWS4-HMAC-SHA256 [redacted]
}

// The Gemini API's generateContent, with the model in the path and the key
// in x-goog-api-key. A rate limit is a google.rpc.Status whose RetryInfo
// carries the delay.
func ExampleServer_gemini() {
	s := fake.New()
	s.Script("gemini-2.5-flash", fake.RateLimited("30"), fake.Answer("Hi!").Usage(3, 1))
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1beta/models/gemini-2.5-flash:generateContent",
			strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"Hi"}]}]}`))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-goog-api-key", "AIza-test")
		resp, err := s.Client().Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}

	// Output:
	// 429 {"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"30s"}]}}
	// 200 {"candidates":[{"content":{"role":"model","parts":[{"text":"Hi!"}]},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4},"modelVersion":"gemini-2.5-flash","responseId":"resp_fake_2"}
}

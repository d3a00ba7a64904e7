package fake_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/backstop-llm/backstop/provider/fake"
)

// The fake answers raw HTTP in the real wire formats. Here an Anthropic
// model is overloaded once, then answers. An adapter is configured the same
// way: BaseURL s.URL(), HTTPClient s.Client().
func Example() {
	s := fake.New()
	s.Script("claude-sonnet-5-5",
		fake.Overloaded(),
		fake.Answer("Hello!").Usage(12, 3),
	)

	for range 2 {
		req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(
			`{"model":"claude-sonnet-5-5","max_tokens":256,"messages":[{"role":"user","content":"Hi"}]}`))
		if err != nil {
			panic(err)
		}
		req.Header.Set("x-api-key", "sk-ant-test")
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("content-type", "application/json")

		resp, err := s.Client().Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("request-id"))
		fmt.Println(string(body))
	}
	fmt.Println("requests:", s.Requests("claude-sonnet-5-5"))
	fmt.Println("key recorded as:", s.Calls("claude-sonnet-5-5")[0].Header.Get("x-api-key"))

	// Output:
	// 529 req_fake_1
	// {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_fake_1"}
	// 200 req_fake_2
	// {"id":"msg_fake_2","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"Hello!","citations":null}],"stop_reason":"end_turn","stop_sequence":null,"stop_details":null,"container":null,"diagnostics":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":3,"output_tokens_details":{"thinking_tokens":0},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard","inference_geo":"global","speed":"standard"}}
	// requests: 2
	// key recorded as: [redacted]
}

// Start serves the fake on a loopback port, for programs and tests that need
// real connections. Here an OpenAI model is rate limited, then answers.
func ExampleServer_Start() {
	s := fake.New()
	if err := s.Start(); err != nil {
		panic(err)
	}
	defer s.Close()
	s.Script("gpt-6.1", fake.RateLimited("2"), fake.Answer("Hi there"))

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/chat/completions", strings.NewReader(
			`{"model":"gpt-6.1","messages":[{"role":"user","content":"Hi"}]}`))
		if err != nil {
			panic(err)
		}
		req.Header.Set("Authorization", "Bearer sk-test")
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, resp.Header.Get("x-request-id"), resp.Header.Get("retry-after"))
		if resp.StatusCode != http.StatusOK {
			fmt.Println(string(body))
		}
	}

	// Output:
	// 429 req_fake_1 2
	// {"error":{"message":"Rate limit reached for gpt-6.1 in organization org-fake on requests per min (RPM): Limit 60, Used 60, Requested 1. Please try again in 2s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}
	// 200 req_fake_2
}

// Handle decides each outcome with a function: here a model that admits one
// request at a time and rate limits the others.
func ExampleServer_Handle() {
	s := fake.New()
	busy := make(chan struct{}, 1)
	s.Handle("claude-haiku-5", func(c fake.Call) fake.Outcome {
		select {
		case busy <- struct{}{}:
			return fake.Answer(fmt.Sprintf("request %d admitted", c.N)).OnDone(func() { <-busy })
		default:
			return fake.RateLimited("1")
		}
	})

	req, _ := http.NewRequest(http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(
		`{"model":"claude-haiku-5","max_tokens":16,"messages":[{"role":"user","content":"Hi"}]}`))
	req.Header.Set("x-api-key", "sk-ant-test")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := s.Client().Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 200
}

// A request with "stream": true gets the answer as server-sent events. Here
// an Anthropic stream sends two chunks, then fails with an in-stream
// overloaded_error, as the real API does after the 200.
func ExampleOutcome_ErrorAfter() {
	s := fake.New()
	s.Script("claude-sonnet-5-5", fake.Answer("").Chunks("Hel", "lo", "!").Usage(12, 3).ErrorAfter(2))

	req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/messages", strings.NewReader(
		`{"model":"claude-sonnet-5-5","max_tokens":256,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`))
	if err != nil {
		panic(err)
	}
	req.Header.Set("x-api-key", "sk-ant-test")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := s.Client().Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("content-type"))
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))

	// Output:
	// 200 text/event-stream; charset=utf-8
	// event: message_start
	// data: {"type":"message_start","message":{"id":"msg_fake_1","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[],"stop_reason":null,"stop_sequence":null,"stop_details":null,"container":null,"diagnostics":null,"usage":{"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0},"output_tokens":1,"output_tokens_details":{"thinking_tokens":0},"server_tool_use":{"web_search_requests":0,"web_fetch_requests":0},"service_tier":"standard","inference_geo":"global","speed":"standard"}}}
	//
	// event: content_block_start
	// data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":"","citations":null}}
	//
	// event: ping
	// data: {"type":"ping"}
	//
	// event: content_block_delta
	// data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}
	//
	// event: content_block_delta
	// data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}
	//
	// event: error
	// data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}
}

// CallTools answers with tool calls; the next request sends the results
// back, and Calls records them. Here over OpenAI's format.
func ExampleCallTools() {
	s := fake.New()
	s.Script("gpt-5",
		fake.CallTools(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}),
		fake.Answer("It is sunny in Paris."))

	send := func(body string) string {
		req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			panic(err)
		}
		req.Header.Set("authorization", "Bearer sk-test")
		resp, err := s.Client().Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]`
	first := send(`{"model":"gpt-5",` + tools + `,"messages":[{"role":"user","content":"Weather in Paris?"}]}`)
	fmt.Println(strings.Contains(first, `"tool_calls":[{"id":"call_fake_1_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]`),
		strings.Contains(first, `"finish_reason":"tool_calls"`))

	send(`{"model":"gpt-5",` + tools + `,"messages":[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_fake_1_0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_fake_1_0","content":"sunny"}]}`)
	fmt.Printf("%+v\n", s.Calls("gpt-5")[1].ToolResults)

	// Output:
	// true true
	// [{ID:call_fake_1_0 Content:sunny IsError:false}]
}

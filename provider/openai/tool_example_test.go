package openai_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/openai"
)

// A stand-in for api.openai.com that calls get_weather, then answers once
// it has the tool's result.
func fakeToolAPI() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"role":"tool"`) {
			io.WriteString(w, `{"id":"chatcmpl-2","model":"gpt-4.1","choices":[{"index":0,
				"message":{"role":"assistant","content":"It is 21°C in Paris."},"finish_reason":"stop"}]}`)
			return
		}
		io.WriteString(w, `{"id":"chatcmpl-1","model":"gpt-4.1","choices":[{"index":0,
			"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_Wz5Ue3",
			"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
			"finish_reason":"tool_calls"}]}`)
	}))
}

// A tool call and its result: the assistant's calls go back in an
// assistant message, their results in the next user message.
func ExampleProvider_Complete_tools() {
	srv := fakeToolAPI()
	defer srv.Close()
	p, err := openai.New(openai.Config{APIKey: "sk-example", BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	req := llm.Request{
		Model:    "gpt-4.1",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Weather in Paris?"}},
		Tools: []llm.Tool{{Name: "get_weather", Description: "Current weather in a city",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
	}
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Finish, res.ToolCalls[0].Name, string(res.ToolCalls[0].Arguments))

	call := res.ToolCalls[0]
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart(call.ID, call.Name, call.Arguments)}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(call.ID, `{"celsius":21}`, false)}},
	)
	res, err = p.Complete(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Finish, res.Text)
	// Output:
	// tool_use get_weather {"city":"Paris"}
	// stop It is 21°C in Paris.
}

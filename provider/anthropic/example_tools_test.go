package anthropic_test

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
	"github.com/backstop-llm/backstop/provider/anthropic"
)

// A tool call and its result, over two requests. The stand-in for the API
// calls the tool when the conversation has no result yet, and answers with
// the result otherwise.
func ExampleProvider_Complete_tools() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"tool_result"`) {
			io.WriteString(w, `{"type":"message","role":"assistant","model":"claude-sonnet-4-5",
				"content":[{"type":"text","text":"Let me check."},
				{"type":"tool_use","id":"toolu_01A09q90qw90lq917835lq9","name":"get_weather","input":{"city":"Paris"}}],
				"stop_reason":"tool_use","usage":{"input_tokens":80,"output_tokens":40}}`)
			return
		}
		io.WriteString(w, `{"type":"message","role":"assistant","model":"claude-sonnet-4-5",
			"content":[{"type":"text","text":"It is 15°C in Paris."}],
			"stop_reason":"end_turn","usage":{"input_tokens":120,"output_tokens":10}}`)
	}))
	defer srv.Close()

	p, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-example", BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	req := llm.Request{
		Model: "claude-sonnet-4-5",
		Tools: []llm.Tool{{Name: "get_weather", Description: "The weather in a city.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}},
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Weather in Paris?"}},
	}
	res, err := p.Complete(context.Background(), req)
	if err != nil {
		log.Fatal(err)
	}
	call := res.ToolCalls[0]
	fmt.Println(res.Finish, call.Name, string(call.Arguments))

	// Replay the call, answer it, and ask again.
	req.Messages = append(req.Messages,
		llm.Message{Role: llm.RoleAssistant, Content: res.Text, Parts: []llm.Part{{ToolCall: &call}}},
		llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(call.ID, `{"celsius": 15}`, false)}})
	if res, err = p.Complete(context.Background(), req); err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Finish, res.Text)
	// Output:
	// tool_use get_weather {"city":"Paris"}
	// stop It is 15°C in Paris.
}

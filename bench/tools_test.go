package bench

// A call carrying 10 tools whose answer is one tool call, validated by the
// chain against its tool's InputSchema, against the plain validation of
// the same arguments with jsonschema/v6 (the schema compiled once): what
// the chain adds to checking a tool call.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// toolSchema is a realistic tool's input schema: a few typed properties,
// one nested object, an enum.
const toolSchema = `{"type":"object","properties":{
	"city":{"type":"string","minLength":1},
	"unit":{"type":"string","enum":["celsius","fahrenheit"]},
	"days":{"type":"integer","minimum":1,"maximum":14},
	"where":{"type":"object","properties":{"lat":{"type":"number"},"lon":{"type":"number"}},"required":["lat","lon"]}},
	"required":["city","unit"],"additionalProperties":false}`

var toolArgs = json.RawMessage(`{"city":"Paris","unit":"celsius","days":3,"where":{"lat":48.85,"lon":2.35}}`)

// tenTools are the request's tools: each its own schema (another
// property name), the fifth the one called.
func tenTools() []llm.Tool {
	tools := make([]llm.Tool, 10)
	for i := range tools {
		tools[i] = llm.Tool{Name: fmt.Sprintf("tool_%d", i), Description: "a tool",
			InputSchema: json.RawMessage(strings.Replace(toolSchema, `"days"`, fmt.Sprintf(`"days%d"`, i), 1))}
	}
	tools[4].InputSchema = json.RawMessage(toolSchema)
	return tools
}

// caller answers every request with one call of tool_4.
type caller struct{ resp llm.Response }

func (*caller) Name() string { return "anthropic" }
func (c *caller) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return &c.resp, nil
}

func toolChain(tb testing.TB) *chain.Chain {
	p := &caller{resp: llm.Response{Model: "claude-sonnet-5-5", ID: "msg_1", FinishReason: "tool_use", Finish: llm.FinishToolUse,
		ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "tool_4", Arguments: toolArgs}}}}
	c, err := chain.New("agent").Primary(chain.Target{Name: "sonnet", Provider: p, Model: "claude-sonnet-5-5"}).Build()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func toolRequest() llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "weather in Paris?"}}, Tools: tenTools(), Params: llm.Params{MaxTokens: 100}}
}

func plainSchema(tb testing.TB) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(toolSchema))
	if err != nil {
		tb.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("tool.json", doc); err != nil {
		tb.Fatal(err)
	}
	s, err := c.Compile("tool.json")
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func BenchmarkToolCall(b *testing.B) {
	b.Run("jsonschema", func(b *testing.B) {
		s := plainSchema(b)
		b.ReportAllocs()
		for b.Loop() {
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(toolArgs)))
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Validate(inst); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("backstop", func(b *testing.B) {
		c, req, ctx := toolChain(b), toolRequest(), context.Background()
		b.ReportAllocs()
		for b.Loop() {
			res, err := c.Call(ctx, req)
			if err != nil || len(res.ToolCalls) != 1 {
				b.Fatal(err)
			}
		}
	})
}

// TestToolCallBenchmarkChecks checks that the benchmark measures a real
// check: an argument the schema refuses fails the call's attempt.
func TestToolCallBenchmarkChecks(t *testing.T) {
	res, err := toolChain(t).Call(context.Background(), toolRequest())
	if err != nil || res.ToolCalls[0].Name != "tool_4" {
		t.Fatalf("%v %+v", err, res)
	}
	p := &caller{resp: llm.Response{ToolCalls: []llm.ToolCall{{ID: "toolu_1", Name: "tool_4", Arguments: json.RawMessage(`{"city":"Paris","unit":"kelvin"}`)}}}}
	c, err := chain.New("agent").Primary(chain.Target{Name: "sonnet", Provider: p, Model: "m"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), toolRequest()); llm.KindOf(err) != llm.KindInvalidOutput {
		t.Fatalf("an argument outside the enum passed: %v", err)
	}
}

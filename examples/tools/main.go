// Command tools runs an agent loop through a backstop chain: the model
// calls a tool, the program runs it and sends the result back, until the
// model answers. Midway the primary (Anthropic) fails, and a target on
// another provider (OpenAI) finishes the conversation: the same history,
// tool calls and results included, translated to its wire format, with
// the tool-call ids the program was given.
//
// With no API key set it runs against backstop's fake provider on
// loopback:
//
//	go run ./examples/tools
//
// With ANTHROPIC_API_KEY and OPENAI_API_KEY both set, it runs the same
// loop against the real APIs (no failure is injected there).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/openai"
	"github.com/backstop-llm/backstop/retry"
)

const (
	sonnet = "claude-sonnet-4-5"
	gpt    = "gpt-4.1-mini"
)

// weather is the one tool: the model must name a city.
var weather = llm.Tool{
	Name:        "get_weather",
	Description: "Current weather in a city.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`),
}

func main() {
	log.SetFlags(0)
	ctx := context.Background()
	claude, gptp, script, done, err := providers()
	if err != nil {
		log.Fatal(err)
	}
	defer done()
	c, err := chain.New("weather-agent").Deadline(60 * time.Second).
		Primary(chain.Target{Name: "sonnet", Provider: claude, Model: sonnet, Params: llm.Params{MaxTokens: 500},
			Retry: retry.Policy{MaxAttempts: 2, Base: 100 * time.Millisecond}}).
		OrProvider(chain.Target{Name: "gpt", Provider: gptp, Model: gpt, Params: llm.Params{MaxTokens: 500}}).
		Build()
	if err != nil {
		log.Fatal(err)
	}
	req := llm.Request{
		System:   "You answer weather questions. Use the tool for every city.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: "Is it warmer in Paris or in Lyon right now?"}},
		Tools:    []llm.Tool{weather},
	}
	for turn := 1; turn <= 5; turn++ {
		script(turn)
		res, err := c.Call(ctx, req)
		fmt.Printf("\nTurn %d:\n", turn)
		for _, a := range res.Attempts {
			fmt.Println("  ", a)
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("   served by %s (%s), finish %s\n", res.Served.Target, res.Served.Provider, res.Finish)
		if len(res.ToolCalls) == 0 {
			fmt.Printf("   answer: %s\n", res.Text)
			return
		}
		// Replay the model's turn, then answer each of its calls.
		said := llm.Message{Role: llm.RoleAssistant, Content: res.Text}
		results := llm.Message{Role: llm.RoleUser}
		for _, call := range res.ToolCalls {
			out := run(call)
			fmt.Printf("   tool call %s %s(%s) -> %s\n", call.ID, call.Name, call.Arguments, out)
			said.Parts = append(said.Parts, llm.ToolCallPart(call.ID, call.Name, call.Arguments))
			results.Parts = append(results.Parts, llm.ToolResultPart(call.ID, out, false))
		}
		req.Messages = append(req.Messages, said, results)
	}
	log.Fatal("no answer after 5 turns")
}

// run runs a tool call: a made-up weather report.
func run(call llm.ToolCall) string {
	var args struct{ City string }
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return "error: " + err.Error()
	}
	temps := map[string]int{"paris": 14, "lyon": 17}
	t, ok := temps[strings.ToLower(args.City)]
	if !ok {
		t = 12
	}
	return fmt.Sprintf(`{"city":%q,"celsius":%d}`, args.City, t)
}

// providers returns the two providers, a function that scripts the fake
// for each turn (nothing against the real APIs), and what to call at the
// end.
func providers() (claude, gptp llm.Provider, script func(turn int), done func(), err error) {
	if a, o := os.Getenv("ANTHROPIC_API_KEY"), os.Getenv("OPENAI_API_KEY"); a != "" && o != "" {
		claude, err = anthropic.New(anthropic.Config{APIKey: a})
		if err == nil {
			gptp, err = openai.New(openai.Config{APIKey: o})
		}
		return claude, gptp, func(int) {}, func() {}, err
	}
	fmt.Println("Running against backstop's fake provider (set ANTHROPIC_API_KEY and OPENAI_API_KEY to call the real APIs).")
	ant, oai := fake.New(), fake.New()
	for _, s := range []*fake.Server{ant, oai} {
		if err := s.Start(); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	done = func() {
		fmt.Printf("\nRequests: Anthropic %d, OpenAI %d.\n", ant.Requests(sonnet), oai.Requests(gpt))
		for i, ids := range toolResults(oai) {
			fmt.Printf("OpenAI request %d answered the tool calls %v\n", i+1, ids)
		}
		ant.Close()
		oai.Close()
	}
	script = func(turn int) {
		switch turn {
		case 1: // Anthropic asks for Paris.
			ant.Script(sonnet, fake.Answer("Let me check Paris first.").ToolCalls(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}))
		case 2: // Anthropic is overloaded; OpenAI carries on with the history and asks for Lyon.
			ant.Script(sonnet, fake.Overloaded(), fake.Overloaded())
			oai.Script(gpt, fake.CallTools(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Lyon"}`}))
		case 3: // The primary's breaker is still closed but it fails again; OpenAI answers.
			ant.Script(sonnet, fake.Overloaded(), fake.Overloaded())
			oai.Script(gpt, fake.Answer("Lyon is warmer: 17°C against 14°C in Paris."))
		}
	}
	claude, err = anthropic.New(anthropic.Config{APIKey: "fake-key", BaseURL: ant.URL()})
	if err == nil {
		gptp, err = openai.New(openai.Config{APIKey: "fake-key", BaseURL: oai.URL()})
	}
	return claude, gptp, script, done, err
}

// toolResults lists, for each request OpenAI's fake received, the ids of
// the tool calls its tool results answered (tool_call_id).
func toolResults(s *fake.Server) [][]string {
	var out [][]string
	for _, call := range s.Calls(gpt) {
		var ids []string
		for _, r := range call.ToolResults {
			ids = append(ids, r.ID)
		}
		out = append(out, ids)
	}
	return out
}

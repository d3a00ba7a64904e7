package backstop_test

// A tool conversation that moves from one provider to the other mid-way,
// through a chain, the real adapters and the fake's two wire formats: the
// history (tool calls, tool results, the ids the caller was given) reaches
// the second provider whole, in its own format, and the ids the caller
// sees are the ones it was given.

import (
	"encoding/json"
	"slices"
	"testing"
	"testing/synctest"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/retry"
)

var weatherTool = llm.Tool{Name: "get_weather", Description: "Current weather in a city.",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`)}

// agentTurn sends req, answers every tool call of the answer with result,
// and returns the conversation to send next and the answer.
func agentTurn(t *testing.T, c *chain.Chain, req llm.Request, result string) (llm.Request, *chain.Result) {
	t.Helper()
	res, err := c.Call(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolCalls) == 0 {
		return req, res
	}
	said := llm.Message{Role: llm.RoleAssistant, Content: res.Text}
	told := llm.Message{Role: llm.RoleUser}
	for _, call := range res.ToolCalls {
		said.Parts = append(said.Parts, llm.ToolCallPart(call.ID, call.Name, call.Arguments))
		told.Parts = append(told.Parts, llm.ToolResultPart(call.ID, result, false))
	}
	next := req
	next.Messages = append(slices.Clip(req.Messages), said, told)
	return next, res
}

func TestToolConversationMovesAcrossProviders(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		firstIs, secondIs    string // "anthropic" or "openai"
		firstID, firstPrefix string
	}{
		{"anthropic then openai", "anthropic", "openai", "toolu_fake_", "toolu_"},
		{"openai then anthropic", "openai", "anthropic", "call_fake_", "call_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				first, second := fake.New(), fake.New()
				provider := func(kind string, f *fake.Server) llm.Provider {
					if kind == "anthropic" {
						return claude(t, f)
					}
					return openAI(t, f)
				}
				model := map[string]string{"anthropic": sonnet, "openai": gpt}
				c, err := chain.New("agent").
					Primary(chain.Target{Name: "first", Provider: provider(tc.firstIs, first), Model: model[tc.firstIs], Retry: retry.Policy{MaxAttempts: 1}}).
					OrProvider(chain.Target{Name: "second", Provider: provider(tc.secondIs, second), Model: model[tc.secondIs]}).
					Build()
				if err != nil {
					t.Fatal(err)
				}
				req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Paris or Lyon: which is warmer?"}}, Tools: []llm.Tool{weatherTool}}

				// Turn 1: the first provider calls the tool.
				first.Script(model[tc.firstIs], fake.Answer("Checking Paris.").ToolCalls(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Paris"}`}))
				req, res := agentTurn(t, c, req, `{"celsius":14}`)
				if res.Served.Target != "first" || len(res.ToolCalls) != 1 || res.Finish != llm.FinishToolUse {
					t.Fatalf("turn 1: %+v %+v", res.Served, res.Response)
				}
				firstID := res.ToolCalls[0].ID
				if len(firstID) < len(tc.firstID) || firstID[:len(tc.firstID)] != tc.firstID {
					t.Fatalf("turn 1's call id %q, want the first provider's (%s…)", firstID, tc.firstID)
				}

				// Turn 2: the first provider is down; the second gets the
				// whole history and calls the tool again.
				first.Script(model[tc.firstIs], fake.Overloaded())
				second.Script(model[tc.secondIs], fake.CallTools(fake.ToolCall{Name: "get_weather", Arguments: `{"city":"Lyon"}`}))
				req, res = agentTurn(t, c, req, `{"celsius":17}`)
				if res.Served.Target != "second" || len(res.ToolCalls) != 1 {
					t.Fatalf("turn 2: %+v %+v", res.Served, res.Response)
				}
				secondID := res.ToolCalls[0].ID
				got := second.Calls(model[tc.secondIs])
				if len(got) != 1 || len(got[0].ToolResults) != 1 || got[0].ToolResults[0].ID != firstID || got[0].ToolResults[0].Content != `{"celsius":14}` {
					t.Fatalf("the second provider got tool results %+v, want the first's call %q answered", got, firstID)
				}

				// Turn 3: the second provider answers, with both calls and
				// both results in the history, each under the id the caller
				// was given.
				second.Script(model[tc.secondIs], fake.Answer("Lyon is warmer."))
				_, res = agentTurn(t, c, req, "")
				if res.Text != "Lyon is warmer." || res.Finish != llm.FinishStop {
					t.Fatalf("turn 3: %+v", res.Response)
				}
				got = second.Calls(model[tc.secondIs])
				var ids []string
				for _, r := range got[1].ToolResults {
					ids = append(ids, r.ID)
				}
				if !slices.Equal(ids, []string{firstID, secondID}) {
					t.Fatalf("turn 3 sent tool results for %q, want %q", ids, []string{firstID, secondID})
				}
			})
		})
	}
}

// TestForeignToolCallIDsAreTranslatedAndBack: ids a provider would refuse
// (another framework's "functions.get_weather:0", an id longer than
// OpenAI's 40 bytes) go out in a shape it takes, consistently for the call
// and its result (the fake checks the pairing as the APIs do), and the
// conversation goes through.
func TestForeignToolCallIDsAreTranslatedAndBack(t *testing.T) {
	long := "fc_0123456789abcdef0123456789abcdef0123456789abcdef" // 51 bytes
	for _, tc := range []struct {
		kind, id   string
		translated bool
	}{
		{"anthropic", "functions.get_weather:0", true},
		{"openai", "functions.get_weather:0", true},
		{"anthropic", long, false}, // Anthropic takes it: sent as it is
		{"openai", long, true},     // over OpenAI's 40 bytes
		{"openai", "toolu_01A09q90qw90lq917835lq9", false},
	} {
		t.Run(tc.kind+"/"+tc.id, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := fake.New()
				p, model := claude(t, f), sonnet
				if tc.kind == "openai" {
					p, model = openAI(t, f), gpt
				}
				c, err := chain.New("agent").Primary(chain.Target{Name: "p", Provider: p, Model: model}).Build()
				if err != nil {
					t.Fatal(err)
				}
				f.Script(model, fake.Answer("Paris is at 14°C."))
				req := llm.Request{Tools: []llm.Tool{weatherTool}, Messages: []llm.Message{
					{Role: llm.RoleUser, Content: "Weather in Paris?"},
					{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart(tc.id, "get_weather", json.RawMessage(`{"city":"Paris"}`))}},
					{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(tc.id, `{"celsius":14}`, false)}},
				}}
				res, err := c.Call(t.Context(), req)
				if err != nil || res.Text != "Paris is at 14°C." {
					t.Fatalf("%v %+v", err, res)
				}
				sent := f.Calls(model)[0].ToolResults
				if len(sent) != 1 || sent[0].ID == "" || (sent[0].ID != tc.id) != tc.translated {
					t.Fatalf("the provider got tool results %+v; want %q translated: %v", sent, tc.id, tc.translated)
				}
			})
		})
	}
}

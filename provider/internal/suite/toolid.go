package suite

import (
	"context"
	"encoding/json"
	"io"
	"slices"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
)

// Echo, as an id of ToolIDCase.Sent, is the id the request sent for the
// history's first tool call: what a provider echoing it would send back
// (the caller's id translated, when the adapter translated it).
const Echo = "\x00echo"

// ToolIDCase is an answer whose tool calls would repeat an id of the
// conversation, and the ids the caller must be given for them.
type ToolIDCase struct {
	Name string
	// History is the conversation the request carries; it ends with a
	// user turn.
	History []llm.Message
	// Sent are the ids of the answer's calls: an id, Echo, or "" for the
	// provider's own choice (the fake's toolu_fake_…/call_fake_…; Gemini
	// sends none, and the adapter names the call).
	Sent []string
	// Want are the ids the caller is given (nil: any distinct ones).
	Want []string
}

// ToolWeather is the tool of the ToolIDCases' requests.
var ToolWeather = llm.Tool{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}}}`)}

// ToolIDHistory is a conversation in which get_weather was called once,
// with the id id, and answered.
func ToolIDHistory(id string) []llm.Message {
	return []llm.Message{
		{Role: llm.RoleUser, Content: "Weather in Paris, then Rome?"},
		{Role: llm.RoleAssistant, Parts: []llm.Part{llm.ToolCallPart(id, "get_weather", json.RawMessage(`{"city":"Paris"}`))}},
		{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart(id, "sunny", false)}},
	}
}

// ToolIDCases are the answers every adapter must name apart: whatever the
// provider sends, no two calls of the conversation share an id.
func ToolIDCases() []ToolIDCase {
	return []ToolIDCase{
		{Name: "two calls share one id", History: []llm.Message{{Role: llm.RoleUser, Content: "Weather in Paris and Rome?"}},
			Sent: []string{"dup_id", "dup_id"}, Want: []string{"dup_id", "dup_id_2"}},
		{Name: "an id of the history", History: ToolIDHistory("call_1"),
			Sent: []string{"call_1"}, Want: []string{"call_1_2"}},
		{Name: "an id of the history twice", History: ToolIDHistory("call_1"),
			Sent: []string{"call_1", "call_1"}, Want: []string{"call_1_2", "call_1_3"}},
		// An id other adapters translate going out (OpenAI and Anthropic
		// refuse its shape), echoed: it comes back as the caller's.
		{Name: "a translated id of the history", History: ToolIDHistory("functions.get_weather:0"),
			Sent: []string{Echo}, Want: []string{"functions.get_weather:0_2"}},
		// genai named Gemini's id-less calls call_<calls in the history>:
		// call_1 here, the id an OpenAI-compatible server gave the
		// history's call.
		{Name: "calls without ids after call_1", History: ToolIDHistory("call_1"),
			Sent: []string{"", ""}},
	}
}

// ToolIDRequest is the request of c to model.
func ToolIDRequest(model string, c ToolIDCase) llm.Request {
	return llm.Request{Model: model, Messages: c.History, Tools: []llm.Tool{ToolWeather}, Params: llm.Params{MaxTokens: 100}}
}

// FollowUp is req continued by the answer's calls and a result for each:
// what a caller sends next.
func FollowUp(req llm.Request, calls []llm.ToolCall) llm.Request {
	call := llm.Message{Role: llm.RoleAssistant}
	results := llm.Message{Role: llm.RoleUser}
	for _, c := range calls {
		call.Parts = append(call.Parts, llm.Part{ToolCall: &c})
		results.Parts = append(results.Parts, llm.ToolResultPart(c.ID, "sunny", false))
	}
	req.Messages = append(slices.Clip(req.Messages), call, results)
	return req
}

// CheckToolIDs fails t unless the ids of calls are set, distinct, and none
// an id of history.
func CheckToolIDs(t testing.TB, history []llm.Message, calls []llm.ToolCall) {
	t.Helper()
	seen := map[string]bool{}
	for _, m := range history {
		for _, p := range m.Parts {
			switch {
			case p.ToolCall != nil:
				seen[p.ToolCall.ID] = true
			case p.ToolResult != nil:
				seen[p.ToolResult.CallID] = true
			}
		}
	}
	for i, c := range calls {
		if c.ID == "" || seen[c.ID] {
			t.Errorf("call %d has the id %q, empty or already in the conversation", i, c.ID)
		}
		seen[c.ID] = true
	}
}

// WireToolIDs returns the tool-call ids a request body carries, in any
// wire format backstop speaks: the calls' (Anthropic tool_use id, OpenAI
// tool_calls id, Responses function_call call_id, Gemini functionCall id)
// and the results' (tool_use_id, tool_call_id, function_call_output
// call_id, functionResponse id).
func WireToolIDs(body []byte) (calls, results []string) {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return nil, nil
	}
	walkIDs(v, &calls, &results)
	return calls, results
}

func walkIDs(v any, calls, results *[]string) {
	str := func(m any, k string) (string, bool) {
		o, _ := m.(map[string]any)
		s, ok := o[k].(string)
		return s, ok
	}
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			walkIDs(e, calls, results)
		}
	case map[string]any:
		typ, _ := str(x, "type")
		add := func(to *[]string, m any, k string) {
			if s, ok := str(m, k); ok {
				*to = append(*to, s)
			}
		}
		switch typ {
		case "tool_use":
			add(calls, x, "id")
		case "tool_result":
			add(results, x, "tool_use_id")
		case "function_call":
			add(calls, x, "call_id")
		case "function_call_output":
			add(results, x, "call_id")
		}
		if tcs, ok := x["tool_calls"].([]any); ok {
			for _, tc := range tcs {
				add(calls, tc, "id")
			}
		}
		add(results, x, "tool_call_id")
		for _, k := range []string{"functionCall", "function_call"} {
			add(calls, x[k], "id")
		}
		for _, k := range []string{"functionResponse", "function_response"} {
			add(results, x[k], "id")
		}
		for _, e := range x {
			walkIDs(e, calls, results)
		}
	}
}

// CheckWireToolIDs fails t unless the request body carries distinct call
// ids and a result for each, every result answering one of them.
func CheckWireToolIDs(t testing.TB, body []byte) {
	t.Helper()
	calls, results := WireToolIDs(body)
	seen := map[string]bool{}
	for _, id := range calls {
		if seen[id] {
			t.Errorf("the request sends two calls with the id %q: %s", id, body)
		}
		seen[id] = true
	}
	if len(results) != len(calls) {
		t.Errorf("the request sends %d calls and %d results: %s", len(calls), len(results), body)
	}
	for _, id := range results {
		if !seen[id] {
			t.Errorf("the request sends a result for %q, which no call has: %s", id, body)
		}
	}
}

// ToolIDTarget is an adapter as ToolIDs drives it, and the server it
// sends to.
type ToolIDTarget struct {
	Provider llm.StreamProvider
	Model    string
	// Serve makes the server answer the next request with tool calls of
	// get_weather, {"city":"Rome"}, with the ids ids returns for the
	// request's body ("" for none, or the server's choice), and the one
	// after it with the text "Sunny in both.".
	Serve func(ids func(body []byte) []string)
	// Last returns the body of the last request the server received.
	Last func() []byte
}

// FakeTarget is p sending to s, for model.
func FakeTarget(s *fake.Server, model string, p llm.StreamProvider) ToolIDTarget {
	return ToolIDTarget{Provider: p, Model: model,
		Serve: func(ids func(body []byte) []string) {
			answered := false
			s.Handle(model, func(call fake.Call) fake.Outcome {
				if answered {
					return fake.Answer("Sunny in both.")
				}
				answered = true
				var tcs []fake.ToolCall
				for _, id := range ids(call.Body) {
					tcs = append(tcs, fake.ToolCall{ID: id, Name: ToolWeather.Name, Arguments: `{"city":"Rome"}`})
				}
				return fake.CallTools(tcs...)
			})
		},
		Last: func() []byte {
			calls := s.Calls(model)
			if len(calls) == 0 {
				return nil
			}
			return calls[len(calls)-1].Body
		}}
}

// ToolIDs drives the target through every ToolIDCase, whole and streamed:
// the server answers the case's calls, the caller must be given distinct
// ids (the case's Want), and the next turn, answering them, must be
// accepted and send distinct ids, a result for each.
func ToolIDs(t *testing.T, tg ToolIDTarget) {
	for _, c := range ToolIDCases() {
		for _, stream := range []bool{false, true} {
			name := c.Name
			if stream {
				name += ", streamed"
			}
			t.Run(name, func(t *testing.T) {
				tg.Serve(func(body []byte) []string {
					wire, _ := WireToolIDs(body)
					ids := slices.Clone(c.Sent)
					for i, id := range ids {
						if id == Echo && len(wire) > 0 {
							ids[i] = wire[0]
						}
					}
					return ids
				})
				req := ToolIDRequest(tg.Model, c)
				calls := answerCalls(t, tg.Provider, req, stream)
				CheckToolIDs(t, c.History, calls)
				if c.Want != nil {
					var got []string
					for _, tc := range calls {
						got = append(got, tc.ID)
					}
					if !slices.Equal(got, c.Want) {
						t.Errorf("ids %q; want %q", got, c.Want)
					}
				}
				if t.Failed() {
					return
				}
				res, err := tg.Provider.Complete(context.Background(), FollowUp(req, calls))
				if err != nil {
					t.Fatalf("the next turn was refused: %v", err)
				}
				if res.Text != "Sunny in both." {
					t.Errorf("next turn answered %+v", res)
				}
				CheckWireToolIDs(t, tg.Last())
			})
		}
	}
}

// answerCalls returns the tool calls of p's answer to req: Complete's, or
// the ToolCall chunks of a Stream, which must be its Response's too.
func answerCalls(t *testing.T, p llm.StreamProvider, req llm.Request, stream bool) []llm.ToolCall {
	t.Helper()
	if !stream {
		res, err := p.Complete(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return res.ToolCalls
	}
	st, err := p.Stream(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	chunks, err := ReadChunks(t, st)
	if err != io.EOF {
		t.Fatalf("stream: %v", err)
	}
	var calls []llm.ToolCall
	for _, ch := range chunks {
		if ch.ToolCall != nil {
			calls = append(calls, *ch.ToolCall)
		}
	}
	if got := st.Response().ToolCalls; !slices.EqualFunc(got, calls, func(a, b llm.ToolCall) bool { return a.ID == b.ID }) {
		t.Errorf("Response().ToolCalls %+v; the chunks gave %+v", got, calls)
	}
	return calls
}

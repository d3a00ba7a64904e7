package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/validate"
)

// weather is a tool whose city argument is required.
var weather = llm.Tool{Name: "get_weather", Description: "the weather in a city",
	InputSchema: json.RawMessage(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`)}

// askWeather is a request carrying the weather tool.
func askWeather() llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "weather in Paris?"}}, Tools: []llm.Tool{weather}}
}

// recorder is a provider that answers from a list, in order, and keeps
// every request it was sent.
type recorder struct {
	name    string
	caps    llm.Capabilities // 0: declares nothing
	answers []*llm.Response
	mu      sync.Mutex
	reqs    []llm.Request
}

func (r *recorder) Name() string { return r.name }

func (r *recorder) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	if len(r.answers) == 0 {
		return &llm.Response{Text: "ok", Model: req.Model}, nil
	}
	a := r.answers[0]
	if len(r.answers) > 1 {
		r.answers = r.answers[1:]
	}
	return a, nil
}

// capable is a recorder that declares its capabilities.
type capable struct{ *recorder }

func (c capable) Capabilities() llm.Capabilities { return c.caps }

func calls(cs ...llm.ToolCall) *llm.Response {
	return &llm.Response{ToolCalls: cs, Finish: llm.FinishToolUse, FinishReason: "tool_use"}
}

func TestValidToolCallIsServed(t *testing.T) {
	p := &recorder{name: "anthropic", answers: []*llm.Response{calls(llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)})}}
	c, err := chain.New("agent").Primary(chain.Target{Name: "sonnet", Provider: p, Model: "sonnet-5"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(context.Background(), askWeather())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "toolu_1" || res.Finish != llm.FinishToolUse {
		t.Fatalf("answer %+v", res.Response)
	}
	if got := p.reqs[0].Tools; len(got) != 1 || got[0].Name != "get_weather" {
		t.Fatalf("tools sent: %+v", got)
	}
}

// TestInvalidToolCallIsReaskedOnceThenTheNextTarget: a call whose
// arguments fail the tool's schema is re-asked once on the same target,
// the model told as an error tool result; a second failure moves on.
func TestInvalidToolCallIsReaskedOnceThenTheNextTarget(t *testing.T) {
	for _, tc := range []struct {
		name, says string
		bad        llm.ToolCall
		match      error
	}{
		{"bad arguments", `missing property`, llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"town":"Paris"}`)}, validate.ErrInvalid},
		{"not JSON", `arguments do not match`, llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":`)}, validate.ErrBadJSON},
		{"unknown tool", `There is no tool named "get_time". The tools are: get_weather.`, llm.ToolCall{ID: "toolu_1", Name: "get_time", Arguments: json.RawMessage(`{}`)}, validate.ErrUnknownTool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			primary := &recorder{name: "anthropic", answers: []*llm.Response{calls(tc.bad)}}
			good := llm.ToolCall{ID: "call_9", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
			other := &recorder{name: "openai", answers: []*llm.Response{calls(good)}}
			c, err := chain.New("agent").
				Primary(chain.Target{Name: "sonnet", Provider: primary, Model: "sonnet-5"}).
				OrProvider(chain.Target{Name: "gpt", Provider: other, Model: "gpt-6"}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Call(context.Background(), askWeather())
			if err != nil {
				t.Fatal(err)
			}
			if res.Served.Target != "gpt" || len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "call_9" {
				t.Fatalf("served %+v with %+v", res.Served, res.ToolCalls)
			}
			if len(primary.reqs) != 2 {
				t.Fatalf("primary asked %d times, want 2 (the call, one re-ask)", len(primary.reqs))
			}
			re := primary.reqs[1].Messages
			if len(re) != 3 {
				t.Fatalf("re-ask has %d messages, want 3: %+v", len(re), re)
			}
			said, told := re[1], re[2]
			if said.Role != llm.RoleAssistant || told.Role != llm.RoleUser {
				t.Fatalf("re-ask roles: %+v", re)
			}
			if tc.name == "not JSON" {
				// Arguments that are not JSON cannot be replayed as a call:
				// the model is told in words.
				if !strings.Contains(told.Content, tc.says) {
					t.Fatalf("re-ask %+v, want it to say %q", told, tc.says)
				}
			} else {
				if len(said.Parts) != 1 || said.Parts[0].ToolCall == nil || said.Parts[0].ToolCall.ID != "toolu_1" {
					t.Fatalf("the re-ask does not replay the call: %+v", said)
				}
				if len(told.Parts) != 1 || told.Parts[0].ToolResult == nil {
					t.Fatalf("the re-ask does not answer the call: %+v", told)
				}
				if r := told.Parts[0].ToolResult; r.CallID != "toolu_1" || !r.IsError || !strings.Contains(r.Content, tc.says) {
					t.Fatalf("tool result %+v, want an error saying %q", r, tc.says)
				}
			}
			if err := primary.reqs[1].Validate(); err != nil {
				t.Fatalf("the re-ask is not a valid conversation: %v", err)
			}
			if len(other.reqs[0].Messages) != 1 {
				t.Fatalf("the next target got the re-ask: %+v", other.reqs[0].Messages)
			}
			first := res.Attempts[0]
			var terr *validate.ToolCallError
			if first.Kind != llm.KindInvalidOutput || !errors.As(first.Err, &terr) || !errors.Is(first.Err, tc.match) || terr.Call != 0 {
				t.Fatalf("attempt 1: %v %v", first.Kind, first.Err)
			}
			if got := lines(res); !strings.Contains(got, "sonnet #1: 200 invalid_output -> retry") || !strings.Contains(got, "sonnet #2: 200 invalid_output -> next") {
				t.Fatalf("records:\n%s", got)
			}
		})
	}
}

func TestToolCallsAreNotCheckedAgainstTheAnswerSchema(t *testing.T) {
	p := &recorder{name: "anthropic", answers: []*llm.Response{calls(llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)})}}
	c, err := chain.New("agent").Schema([]byte(`{"type":"object","required":["answer"]}`)).
		Primary(chain.Target{Name: "sonnet", Provider: p, Model: "sonnet-5"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(context.Background(), askWeather())
	if err != nil || len(res.ToolCalls) != 1 || res.JSON != nil {
		t.Fatalf("%v %+v", err, res)
	}
}

// TestBadToolSchemaStopsTheChain: a call of a tool whose InputSchema is
// not a JSON Schema cannot be checked; the request is wrong everywhere, so
// the chain stops (no re-ask, no next target) with a bad request.
func TestBadToolSchemaStopsTheChain(t *testing.T) {
	call := llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
	p := &recorder{name: "anthropic", answers: []*llm.Response{calls(call)}}
	other := &recorder{name: "openai"}
	c, err := chain.New("agent").Primary(chain.Target{Name: "sonnet", Provider: p, Model: "sonnet-5"}).
		OrProvider(chain.Target{Name: "gpt", Provider: other, Model: "gpt-6"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	req := askWeather()
	req.Tools[0].InputSchema = json.RawMessage(`{"type": 12}`)
	_, err = c.Call(context.Background(), req)
	if llm.KindOf(err) != llm.KindBadRequest || len(p.reqs) != 1 || len(other.reqs) != 0 ||
		!strings.Contains(err.Error(), `tool "get_weather": InputSchema is not a valid JSON Schema`) {
		t.Fatalf("%v; %d and %d requests", err, len(p.reqs), len(other.reqs))
	}
}

// TestConversationNoProviderTakesIsSentNowhere: Request.Validate runs
// before any target is tried.
func TestConversationNoProviderTakesIsSentNowhere(t *testing.T) {
	p := &recorder{name: "anthropic"}
	c, err := chain.New("agent").Primary(chain.Target{Name: "sonnet", Provider: p, Model: "sonnet-5"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	req := askWeather()
	req.Messages = append(req.Messages, llm.Message{Role: llm.RoleUser, Parts: []llm.Part{llm.ToolResultPart("toolu_404", "18C", false)}})
	res, err := c.Call(context.Background(), req)
	var le *llm.Error
	if !errors.As(err, &le) || le.Kind != llm.KindBadRequest || !strings.Contains(le.Message, "message 1 (user), part 0") {
		t.Fatalf("%v", err)
	}
	if len(p.reqs) != 0 || len(res.Attempts) != 0 {
		t.Fatalf("%d requests, attempts %v", len(p.reqs), res.Attempts)
	}
	if v := chain.VerdictOf(err); v != retry.VerdictBadRequest {
		t.Fatalf("verdict %v", v)
	}
}

// TestTargetThatCannotCarryTheRequestIsSkipped: a provider that declares
// it takes no images, or a target that Lacks them, is passed over without
// a request, with the reason recorded.
func TestTargetThatCannotCarryTheRequestIsSkipped(t *testing.T) {
	img := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is this?", Parts: []llm.Part{llm.ImagePart("image/png", []byte("\x89PNG"))}}}}
	for _, tc := range []struct {
		name    string
		primary chain.Target
	}{
		{"provider declares", chain.Target{Name: "blind", Provider: capable{&recorder{name: "anthropic", caps: llm.CapTools}}, Model: "m"}},
		{"target lacks", chain.Target{Name: "blind", Provider: &recorder{name: "anthropic"}, Model: "m", Lacks: llm.CapImages}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sib := &recorder{name: "anthropic"}
			c, err := chain.New("vision").Primary(tc.primary).
				OrSibling(chain.Target{Name: "sees", Provider: sib, Model: "m2"}).Build()
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Call(context.Background(), img)
			if err != nil || res.Served.Target != "sees" {
				t.Fatalf("%v %+v", err, res.Served)
			}
			skip := res.Attempts[0]
			if skip.Decision != chain.DecisionSkip || !errors.Is(skip.Err, chain.ErrCapability) || skip.Reason != "cannot carry images" {
				t.Fatalf("skip record %+v", skip)
			}
			if got := len(sib.reqs[0].Messages[0].Parts); got != 1 {
				t.Fatalf("the image did not reach the sibling: %d parts", got)
			}
			// A text-only request is still sent to the primary.
			res, err = c.Call(context.Background(), askWeather())
			if err != nil || res.Served.Target != "blind" {
				t.Fatalf("%v %+v", err, res.Served)
			}
			if w := c.Warnings(); len(w) != 0 {
				t.Fatalf("warnings %q: the later target takes more, not less", w)
			}
		})
	}
}

func TestWarningsNameALaterTierThatCarriesLess(t *testing.T) {
	c, err := chain.New("vision").
		Primary(chain.Target{Name: "sees", Provider: &recorder{name: "anthropic"}, Model: "m"}).
		OrProvider(chain.Target{Name: "blind", Provider: capable{&recorder{name: "local", caps: llm.CapTools}}, Model: "m"}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(c.Warnings(), "\n")
	for _, want := range []string{`target "blind" (provider) cannot carry images, which "sees" takes`, "cannot carry documents", "cannot carry native schema"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
	if strings.Contains(w, "cannot carry tools") {
		t.Errorf("warned of tools, which both take:\n%s", w)
	}
}

// checker is a provider that refuses some response schemas.
type checker struct{ *recorder }

func (checker) CheckResponseSchema(schema []byte) error {
	if strings.Contains(string(schema), "patternProperties") {
		return errors.New("/: patternProperties is not supported; list the properties")
	}
	return nil
}

func TestNativeSchemaIsSentAndValidatedAllTheSame(t *testing.T) {
	schema := []byte(`{"type":"object","properties":{"answer":{"type":"string"}},"required":["answer"],"additionalProperties":false}`)
	p := &recorder{name: "openai", answers: []*llm.Response{{Text: `{"answer":42}`}, {Text: `{"answer":"yes"}`}}}
	plain := &recorder{name: "openai", answers: []*llm.Response{{Text: `{"answer":"no"}`}}}
	c, err := chain.New("extract").Schema(schema).
		Primary(chain.Target{Name: "gpt", Provider: checker{p}, Model: "gpt-6", NativeSchema: true}).
		OrSibling(chain.Target{Name: "mini", Provider: plain, Model: "gpt-6-mini"}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(context.Background(), question)
	if err != nil || string(res.JSON) != `{"answer":"yes"}` {
		t.Fatalf("%v %s", err, res.JSON)
	}
	if got := string(p.reqs[0].ResponseSchema); got != string(schema) {
		t.Fatalf("ResponseSchema sent %q", got)
	}
	if len(p.reqs) != 2 {
		t.Fatalf("the answer that broke its native schema was not re-asked: %d requests", len(p.reqs))
	}
	if question.ResponseSchema != nil {
		t.Fatal("the caller's request was changed")
	}
	c2, err := chain.New("extract").Schema(schema).
		Primary(chain.Target{Name: "mini", Provider: plain, Model: "gpt-6-mini"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Call(context.Background(), question); err != nil || plain.reqs[len(plain.reqs)-1].ResponseSchema != nil {
		t.Fatalf("a target without NativeSchema was sent one: %v", err)
	}
}

func TestNativeSchemaBuildErrorsNameTheTarget(t *testing.T) {
	good := []byte(`{"type":"object"}`)
	for _, tc := range []struct {
		name   string
		schema []byte
		target chain.Target
		says   string
	}{
		{"no schema", nil, chain.Target{Name: "gpt", Provider: &recorder{name: "openai"}, Model: "m", NativeSchema: true}, "neither the target nor the chain has a Schema"},
		{"provider lacks it", good, chain.Target{Name: "gpt", Provider: capable{&recorder{name: "openai", caps: llm.CapTools}}, Model: "m", NativeSchema: true}, `provider "openai" cannot enforce a schema natively (its capabilities: tools)`},
		{"target lacks it", good, chain.Target{Name: "gpt", Provider: &recorder{name: "openai"}, Model: "m", NativeSchema: true, Lacks: llm.CapNativeSchema}, "cannot enforce a schema natively"},
		{"schema refused", []byte(`{"type":"object","patternProperties":{"^a":{}}}`), chain.Target{Name: "gpt", Provider: checker{&recorder{name: "openai"}}, Model: "m", NativeSchema: true}, "patternProperties is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := chain.New("extract").Primary(tc.target)
			if tc.schema != nil {
				b.Schema(tc.schema)
			}
			_, err := b.Build()
			var ce *chain.ConfigError
			if !errors.As(err, &ce) || ce.Target != "gpt" || !strings.Contains(err.Error(), tc.says) || !errors.Is(err, llm.ErrInvalidConfig) {
				t.Fatalf("%v, want a problem of gpt saying %q", err, tc.says)
			}
		})
	}
}

// TestStreamRelaysToolCalls: a streamed tool call reaches the caller as
// its own chunk and in the result, checked against the tool's schema.
func TestStreamRelaysToolCalls(t *testing.T) {
	call := llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
	p := &rprov{name: "anthropic", steps: []step{{text: "Let me look. "}, {call: &call}}}
	c, err := chain.New("agent").Primary(chain.Target{Name: "sonnet", Provider: p, Model: "sonnet-5"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	s := c.Stream(context.Background(), askWeather())
	var text string
	var got []*llm.ToolCall
	for ch, err := range s.Chunks() {
		if err != nil {
			t.Fatal(err)
		}
		text += ch.Text
		if ch.ToolCall != nil {
			got = append(got, ch.ToolCall)
		}
	}
	res, err := s.Result()
	if err != nil || text != "Let me look. " || len(got) != 1 || got[0].ID != "toolu_1" || len(res.ToolCalls) != 1 {
		t.Fatalf("%v %q %v %+v", err, text, got, res.ToolCalls)
	}
}

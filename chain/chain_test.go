package chain_test

import (
	"context"
	"errors"
	"testing"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
)

var question = llm.Request{System: "caller prompt", Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}},
	Params: llm.Params{MaxTokens: 100, Temperature: llm.Float(0.5), Extra: map[string]any{"a": 1, "b": 1}}}

func fail(kind llm.Kind, status int) func(context.Context, llm.Request) (*llm.Response, error) {
	return func(context.Context, llm.Request) (*llm.Response, error) {
		return nil, &llm.Error{Provider: "stub", Status: status, Kind: kind}
	}
}

// mustPanic calls c with question and checks that the call panics with
// want.
func mustPanic(t *testing.T, c *chain.Chain, want any) {
	t.Helper()
	defer func() {
		if p := recover(); p != want {
			t.Fatalf("the call panicked with %v, want %v", p, want)
		}
	}()
	_, _ = c.Call(t.Context(), question)
}

func TestTargetPromptAndParamsReplaceTheCallers(t *testing.T) {
	var got llm.Request
	p := &stub{name: "anthropic", fn: func(_ context.Context, req llm.Request) (*llm.Response, error) {
		got = req
		return &llm.Response{Text: "ok", Model: "served-model", RequestID: "req_1"}, nil
	}}
	c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m", System: "target prompt",
		Params: llm.Params{MaxTokens: 7, Extra: map[string]any{"b": 2, "c": 2}}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(t.Context(), question)
	if err != nil {
		t.Fatal(err)
	}
	if got.Model != "m" || got.System != "target prompt" || got.Params.MaxTokens != 7 ||
		*got.Params.Temperature != 0.5 || got.Params.Extra["a"] != 1 || got.Params.Extra["b"] != 2 || got.Params.Extra["c"] != 2 {
		t.Fatalf("request sent = %+v", got)
	}
	if question.Params.Extra["b"] != 1 {
		t.Fatal("the caller's Extra map was modified")
	}
	want := chain.Served{Target: "p", Tier: chain.TierPrimary, Provider: "anthropic", Model: "served-model", RequestID: "req_1"}
	if res.Served != want || res.Text != "ok" || res.Degraded || len(res.Attempts) != 1 || res.Attempts[0].Status != 200 {
		t.Fatalf("result = %+v", res)
	}
}

func TestCallerPromptIsKeptWhenTargetHasNone(t *testing.T) {
	var got llm.Request
	p := &stub{name: "x", fn: func(_ context.Context, req llm.Request) (*llm.Response, error) {
		got = req
		return &llm.Response{}, nil
	}}
	c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
	if _, err := c.Call(t.Context(), question); err != nil {
		t.Fatal(err)
	}
	if got.System != "caller prompt" || got.Params.MaxTokens != 100 {
		t.Fatalf("request sent = %+v", got)
	}
}

func TestNoMessagesIsRejectedWithoutARequest(t *testing.T) {
	n := 0 // Call sends on the caller's goroutine
	p := &stub{name: "x", fn: func(context.Context, llm.Request) (*llm.Response, error) { n++; return &llm.Response{}, nil }}
	c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
	if _, err := c.Call(t.Context(), llm.Request{}); !errors.Is(err, chain.ErrNoMessages) || n != 0 {
		t.Fatalf("err %v, %d requests", err, n)
	}
}

func TestContentFilterStopsUnlessAllowed(t *testing.T) {
	refuse := &stub{name: "a", fn: fail(llm.KindContentFilter, 200)}
	other := &stub{name: "o"}
	for _, allow := range []bool{false, true} {
		c, _ := chain.New("c").ContentFallback(allow).
			Primary(chain.Target{Name: "p", Provider: refuse, Model: "m"}).
			OrProvider(chain.Target{Name: "o", Provider: other, Model: "g"}).Build()
		res, err := c.Call(t.Context(), question)
		if allow && (err != nil || res.Served.Target != "o") {
			t.Fatalf("allowed: %v %+v", err, res.Served)
		}
		if !allow && (llm.KindOf(err) != llm.KindContentFilter || len(res.Attempts) != 1 || res.Attempts[0].Decision != chain.DecisionStop) {
			t.Fatalf("not allowed: %v %v", err, res.Attempts)
		}
	}
}

func TestNilResponseWithoutErrorIsAFailure(t *testing.T) {
	bad := &stub{name: "a", fn: func(context.Context, llm.Request) (*llm.Response, error) { return nil, nil }}
	c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: bad, Model: "m"}).
		OrProvider(chain.Target{Name: "o", Provider: &stub{name: "o"}, Model: "g"}).Build()
	res, err := c.Call(t.Context(), question)
	if err != nil || res.Served.Target != "o" {
		t.Fatalf("%v %+v", err, res)
	}
}

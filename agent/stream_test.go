package agent_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/openai"
)

// events renders a stream's events, consecutive texts joined.
func events(t *testing.T, seq func(func(agent.Event, error) bool)) (out []string, last agent.Event, err error) {
	t.Helper()
	for ev, e := range seq {
		last, err = ev, e
		switch ev.Kind {
		case agent.Text:
			if n := len(out); n > 0 && strings.HasPrefix(out[n-1], "text:") {
				out[n-1] += ev.Text
				continue
			}
			out = append(out, "text:"+ev.Text)
		case agent.ToolStarted:
			out = append(out, fmt.Sprintf("started:%s %s %s", ev.Call.Call.ID, ev.Call.Call.Name, ev.Call.Call.Arguments))
		case agent.ToolFinished:
			out = append(out, fmt.Sprintf("finished:%s %s replayed=%v", ev.Call.Call.ID, ev.Call.Output, ev.Call.Replayed))
		default:
			out = append(out, ev.Kind.String())
		}
	}
	return out, last, err
}

// TestStreamEvents: on the real wire formats (the fake server), a
// streamed loop yields text as it arrives, a Restart where the chain
// moved on or re-asked, and tool events only for validated calls: the
// primary's invalid call is neither shown nor run (the chain's stream
// holds tool calls until they passed their checks, and the loop takes
// them from the checked answer).
func TestStreamEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := fake.New()
		s.Script("claude-sonnet-5-5",
			fake.Answer("Checking.").ToolCalls(fake.ToolCall{Name: "refund", Arguments: `{"order_id":5}`}),
			fake.Answer("Your refund is on its way.").Chunks("Your refund ", "is on its way.").ErrorAfter(1))
		s.Script("gpt-5",
			fake.Answer("Refunding.").ToolCalls(fake.ToolCall{Name: "refund", Arguments: `{"order_id":"o-1","cents":500}`}),
			fake.Answer("Refunded $5."))
		claude, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-test", BaseURL: s.URL(), HTTPClient: s.Client()})
		if err != nil {
			t.Fatal(err)
		}
		gpt, err := openai.New(openai.Config{APIKey: "sk-test", BaseURL: s.URL(), HTTPClient: s.Client()})
		if err != nil {
			t.Fatal(err)
		}
		c, err := chain.New("agent").RestartStreams(true).
			Primary(chain.Target{Name: "claude", Provider: claude, Model: "claude-sonnet-5-5"}).
			OrProvider(chain.Target{Name: "gpt", Provider: gpt, Model: "gpt-5"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		var r refunds
		l := loop(t, agent.Config{Chain: c, Tools: []agent.Tool{r.tool(t, agent.ToolConfig{}, nil)}})
		got, last, err := events(t, l.Stream(context.Background(), ask("conv-1", "refund o-1")))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			// The invalid call is re-asked on claude (as Call re-asks),
			// whose second answer is cut: the chain moves on to gpt.
			"text:Checking.", "restart", "text:Your refund ", "restart", "text:Refunding.",
			`started:call_1_0 refund {"order_id":"o-1","cents":500}`,
			`finished:call_1_0 {"refund_id":"r-conv-1/1/0","cents":500} replayed=false`,
			"text:Your refund ", "restart", "text:Refunded $5.", "done",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if last.Result == nil || last.Result.Text != "Refunded $5." || r.count() != 1 {
			t.Fatalf("done %+v, refunds %d", last.Result, r.count())
		}
		if calls := s.Calls("gpt-5"); len(calls) != 2 || len(calls[1].ToolResults) != 1 || calls[1].ToolResults[0].ID != "call_1_0" {
			t.Fatalf("gpt was sent %+v", calls)
		}
	})
}

// TestStreamReplayedStep: a retried request's stream replays the recorded
// step (its text, its calls with Replayed results) without asking the
// model for it; a failure is the Done event's error.
func TestStreamReplayedStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failing := true
		m := &model{name: "anthropic", fn: func(n int, req llm.Request) (*llm.Response, error) {
			if answered(req) && failing {
				return nil, &llm.Error{Provider: "anthropic", Kind: llm.KindAuth, Status: 401}
			}
			if answered(req) {
				return answer("Refunded."), nil
			}
			return calls("On it.", call("toolu_1", "refund", `{"order_id":"o-1","cents":500}`)), nil
		}}
		var r refunds
		l := loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{r.tool(t, agent.ToolConfig{}, nil)}})
		conv := ask("conv-1", "refund o-1")
		_, last, err := events(t, l.Stream(context.Background(), conv))
		if err == nil || last.Kind != agent.Done || last.Result == nil || len(last.Result.Steps) != 1 {
			t.Fatalf("the failed stream ended with %+v, %v", last, err)
		}
		failing = false
		got, _, err := events(t, l.Stream(context.Background(), conv))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"text:On it.", `started:call_1_0 refund {"order_id":"o-1","cents":500}`,
			`finished:call_1_0 {"refund_id":"r-conv-1/1/0","cents":500} replayed=true`, "text:Refunded.", "done"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") || r.count() != 1 || len(m.asked()) != 3 {
			t.Fatalf("events\n%s\nrefunds %d, model asked %d times", strings.Join(got, "\n"), r.count(), len(m.asked()))
		}
	})
}

// TestStreamStopsWhenTheReaderLeaves: breaking out of the loop stops the
// run: no tool starts after it.
func TestStreamStopsWhenTheReaderLeaves(t *testing.T) {
	m := &model{name: "anthropic", fn: func(n int, req llm.Request) (*llm.Response, error) {
		return calls("On it.", call("toolu_1", "refund", `{"order_id":"o-1","cents":500}`)), nil
	}}
	var r refunds
	l := loop(t, agent.Config{Chain: chainOf(t, m), Tools: []agent.Tool{r.tool(t, agent.ToolConfig{}, nil)}})
	for ev, err := range l.Stream(context.Background(), ask("conv-1", "refund o-1")) {
		if err != nil {
			t.Fatal(err)
		}
		if ev.Kind == agent.ToolStarted {
			t.Fatalf("a tool started: %+v", ev)
		}
		break
	}
	if r.count() != 0 {
		t.Fatalf("%d refunds", r.count())
	}
}

package chain_test

// The stream trap: a tool call reaches a Stream's consumer only once the
// answer's calls passed their checks, so that a consumer that runs tools
// as chunks arrive never runs an invalid call.

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/validate"
)

// The weather tool's calls: one whose arguments violate its InputSchema
// (no city, an extra property), and a valid one.
var (
	badWeather  = llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: json.RawMessage(`{"town":"Paris"}`)}
	goodWeather = llm.ToolCall{ID: "toolu_2", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}
)

// playbook is a StreamProvider whose nth stream plays the nth script (the
// last one again once they run out), and that keeps every request. A step
// with block set waits, before its chunk, until gate is closed.
type playbook struct {
	name    string
	scripts [][]step
	gate    chan struct{}
	block   int // the step (from 1) that waits for gate; 0: none
	mu      sync.Mutex
	reqs    []llm.Request
}

func (p *playbook) Name() string { return p.name }

func (p *playbook) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return nil, errors.New("playbook only streams")
}

func (p *playbook) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := min(len(p.reqs), len(p.scripts)-1)
	p.reqs = append(p.reqs, req)
	return &played{p: p, ctx: ctx, steps: p.scripts[n]}, nil
}

func (p *playbook) opened() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.reqs)
}

// played is one stream of a playbook provider.
type played struct {
	p     *playbook
	ctx   context.Context
	steps []step
	i     int
	text  strings.Builder
	calls []llm.ToolCall
}

func (s *played) Next() (llm.Chunk, error) {
	if s.i == len(s.steps) {
		return llm.Chunk{}, io.EOF
	}
	if s.p.block > 0 && s.i+1 == s.p.block {
		select {
		case <-s.p.gate:
		case <-s.ctx.Done():
			return llm.Chunk{}, &llm.Error{Provider: s.p.name, Kind: llm.KindCanceled, Err: s.ctx.Err()}
		}
	}
	st := s.steps[s.i]
	s.i++
	s.text.WriteString(st.text)
	if st.call != nil {
		s.calls = append(s.calls, *st.call)
	}
	return llm.Chunk{Text: st.text, ToolCall: st.call}, nil
}

func (s *played) Response() *llm.Response {
	return &llm.Response{Text: s.text.String(), Model: "m", RequestID: "req_" + s.p.name, ToolCalls: s.calls,
		Finish: llm.FinishToolUse}
}

func (s *played) Close() error { return nil }

// seen is what a consumer of a Stream received, in order: text, "|RESTART|"
// and "[call id args]" for a tool call.
func seen(cs []chain.Chunk) string {
	var b strings.Builder
	for _, c := range cs {
		switch {
		case c.Restart:
			b.WriteString("|RESTART|")
		case c.ToolCall != nil:
			b.WriteString("[" + c.ToolCall.ID + " " + string(c.ToolCall.Arguments) + "]")
		default:
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

// decisions lists a result's attempts as "target#n decision kind".
func decisions(res *chain.Result) string {
	var out []string
	for _, a := range res.Attempts {
		s := a.Target + "#" + string(rune('0'+a.N)) + " " + a.Decision.String()
		if a.Err != nil {
			s += " " + a.Kind.String()
		}
		out = append(out, s)
	}
	return strings.Join(out, ", ")
}

// TestStreamNeverDeliversAnInvalidToolCall: a streamed answer whose tool
// call violates the tool's InputSchema reached the consumer as a chunk
// before it was checked; then the stream restarted on the next target
// (or, without RestartStreams, failed), where Call re-asks the same
// target. The invalid call must never be delivered, and the answer must be
// re-asked on the same target as Call does, after a Restart chunk when
// its text had been shown.
func TestStreamNeverDeliversAnInvalidToolCall(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool
		first   []step // the primary's first answer
		then    []step // its answer to the re-ask
		seen    string // what the consumer receives
		record  string
		fbOpens int // streams opened on the fallback
	}{
		{name: "calls only, re-asked quietly", first: []step{{call: &badWeather}}, then: []step{{call: &goodWeather}},
			seen: `[toolu_2 {"city":"Paris"}]`, record: "p#1 retry invalid_output, p#2 served"},
		{name: "calls only, with RestartStreams: nothing to discard", restart: true,
			first: []step{{call: &badWeather}}, then: []step{{call: &goodWeather}},
			seen: `[toolu_2 {"city":"Paris"}]`, record: "p#1 retry invalid_output, p#2 served"},
		{name: "text shown, with RestartStreams: a restart, then the re-ask", restart: true,
			first: []step{{text: "Let me look. "}, {call: &badWeather}}, then: []step{{text: "Looking. "}, {call: &goodWeather}},
			seen: `Let me look. |RESTART|Looking. [toolu_2 {"city":"Paris"}]`, record: "p#1 retry invalid_output, p#2 served"},
		{name: "invalid twice: the next target, as Call", first: []step{{call: &badWeather}}, then: []step{{call: &badWeather}},
			seen: `[toolu_2 {"city":"Paris"}]`, record: "p#1 retry invalid_output, p#2 next invalid_output, o#1 served", fbOpens: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &playbook{name: "anthropic", scripts: [][]step{tc.first, tc.then}}
				o := &playbook{name: "openai", scripts: [][]step{{{call: &goodWeather}}}}
				c, err := chain.New("agent").RestartStreams(tc.restart).
					Primary(chain.Target{Name: "p", Provider: p, Model: "sonnet"}).
					OrProvider(chain.Target{Name: "o", Provider: o, Model: "gpt"}).Build()
				if err != nil {
					t.Fatal(err)
				}
				s := c.Stream(t.Context(), askWeather())
				cs, err := collect(t, s)
				if err != nil {
					t.Fatalf("after %q: %v", seen(cs), err)
				}
				if got := seen(cs); got != tc.seen {
					t.Errorf("the consumer received %q; want %q", got, tc.seen)
				}
				res, _ := s.Result()
				if got := decisions(res); got != tc.record {
					t.Errorf("record %q; want %q", got, tc.record)
				}
				if len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "toolu_2" {
					t.Errorf("Result's calls %+v; want the valid one", res.ToolCalls)
				}
				if p.opened() != 2 || o.opened() != tc.fbOpens {
					t.Fatalf("primary opened %d streams, fallback %d; want 2 and %d", p.opened(), o.opened(), tc.fbOpens)
				}
				// The re-ask replays the invalid call, answered by an error
				// result that says what was wrong, as Call's does.
				reask := p.reqs[1].Messages
				if len(reask) != 3 || len(reask[1].Parts) != 1 || reask[1].Parts[0].ToolCall == nil ||
					reask[1].Parts[0].ToolCall.ID != "toolu_1" || reask[2].Parts[0].ToolResult == nil ||
					!reask[2].Parts[0].ToolResult.IsError {
					t.Errorf("re-ask conversation %+v", reask)
				}
			})
		})
	}
}

// TestStreamShownAnswerWithAnInvalidToolCallEndsWithoutIt: without
// RestartStreams, an answer whose text was shown cannot be re-asked (a
// second answer would be glued onto the first): the stream ends with the
// check's failure, and the invalid call is not delivered.
func TestStreamShownAnswerWithAnInvalidToolCallEndsWithoutIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &playbook{name: "anthropic", scripts: [][]step{{{text: "Let me look. "}, {call: &badWeather}}}}
		c, err := chain.New("agent").Primary(chain.Target{Name: "p", Provider: p, Model: "sonnet"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		s := c.Stream(t.Context(), askWeather())
		cs, err := collect(t, s)
		if got := seen(cs); got != "Let me look. " {
			t.Errorf("the consumer received %q; want the text alone", got)
		}
		if llm.KindOf(err) != llm.KindInvalidOutput || !errors.Is(err, validate.ErrInvalid) || errors.Is(err, chain.ErrIncomplete) {
			t.Errorf("err %v; want the tool call's check failure", err)
		}
		if p.opened() != 1 {
			t.Errorf("%d streams opened; want 1", p.opened())
		}
	})
}

// TestStreamDeliversValidToolCallsAfterTheText: a tool call was delivered
// as it arrived, before the answer's calls were checked; now the calls
// come after the whole text, in order, and are the Result's.
func TestStreamDeliversValidToolCallsAfterTheText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		second := llm.ToolCall{ID: "toolu_3", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Lyon"}`)}
		p := &playbook{name: "anthropic", scripts: [][]step{{{text: "Let me look. "}, {call: &goodWeather}, {text: "And Lyon."}, {call: &second}}}}
		c, err := chain.New("agent").Primary(chain.Target{Name: "p", Provider: p, Model: "sonnet"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		s := c.Stream(t.Context(), askWeather())
		cs, err := collect(t, s)
		if err != nil {
			t.Fatal(err)
		}
		want := `Let me look. And Lyon.[toolu_2 {"city":"Paris"}][toolu_3 {"city":"Lyon"}]`
		if got := seen(cs); got != want {
			t.Errorf("the consumer received %q; want %q", got, want)
		}
		res, _ := s.Result()
		if res.Text != "Let me look. And Lyon." || len(res.ToolCalls) != 2 {
			t.Fatalf("Result %q with %+v", res.Text, res.ToolCalls)
		}
		for i, ch := range cs[len(cs)-2:] {
			if r := res.ToolCalls[i]; ch.ToolCall == nil || ch.ToolCall.ID != r.ID || string(ch.ToolCall.Arguments) != string(r.Arguments) || ch.Text != "" {
				t.Errorf("call chunk %d is %+v; Result's is %+v", i, ch, res.ToolCalls[i])
			}
		}
	})
}

// TestStreamTextIsNotHeldWithTheToolCalls: the text streams as it arrives
// while the tool calls wait for the end: with the provider blocked after
// a tool call, the consumer already has the text, and not the call.
func TestStreamTextIsNotHeldWithTheToolCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &playbook{name: "anthropic", scripts: [][]step{{{text: "Let me look. "}, {call: &goodWeather}, {text: "Done."}}},
			gate: make(chan struct{}), block: 3}
		c, err := chain.New("agent").Primary(chain.Target{Name: "p", Provider: p, Model: "sonnet"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var got []chain.Chunk
		done := make(chan error)
		go func() {
			var last error
			for ch, err := range c.Stream(t.Context(), askWeather()).Chunks() {
				if err != nil {
					last = err
					continue
				}
				mu.Lock()
				got = append(got, ch)
				mu.Unlock()
			}
			done <- last
		}()
		synctest.Wait() // the provider is blocked before its third chunk
		mu.Lock()
		mid := seen(got)
		mu.Unlock()
		if mid != "Let me look. " {
			t.Errorf("while the provider was still sending, the consumer had %q; want the text so far, no call", mid)
		}
		close(p.gate)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if all := seen(got); all != `Let me look. Done.[toolu_2 {"city":"Paris"}]` {
			t.Errorf("the consumer received %q", all)
		}
	})
}

// TestStreamOfAWholeAnswerDeliversItsToolCalls: a target that does not
// stream answered in one text chunk, its (checked) tool calls only in the
// Result: a consumer running tools from the chunks missed them.
func TestStreamOfAWholeAnswerDeliversItsToolCalls(t *testing.T) {
	p := &recorder{name: "anthropic", answers: []*llm.Response{calls(badWeather), calls(goodWeather)}}
	c, err := chain.New("agent").Primary(chain.Target{Name: "p", Provider: p, Model: "sonnet"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	s := c.Stream(context.Background(), askWeather())
	cs, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if got := seen(cs); got != `[toolu_2 {"city":"Paris"}]` {
		t.Errorf("the consumer received %q; want the valid call alone", got)
	}
}

// TestStreamReaskRefusedByTheBudgetMovesOn: the re-ask of a streamed
// answer is a retry like Call's, which the target's retry budget may
// refuse: then the walk moves on, recording the refusal as Call does.
func TestStreamReaskRefusedByTheBudgetMovesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		none, err := budget.NewRatio(budget.RatioConfig{Ratio: 0.01, MinRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		p := &playbook{name: "anthropic", scripts: [][]step{{{call: &badWeather}}}}
		o := &playbook{name: "openai", scripts: [][]step{{{call: &goodWeather}}}}
		c, err := chain.New("agent").
			Primary(chain.Target{Name: "p", Provider: p, Model: "sonnet", Budget: none}).
			OrProvider(chain.Target{Name: "o", Provider: o, Model: "gpt"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		s := c.Stream(t.Context(), askWeather())
		cs, err := collect(t, s)
		if err != nil || seen(cs) != `[toolu_2 {"city":"Paris"}]` {
			t.Fatalf("received %q, %v; want the fallback's valid call", seen(cs), err)
		}
		res, _ := s.Result()
		if got, want := decisions(res), "p#1 next invalid_output, p#2 skip unknown, o#1 served"; got != want {
			t.Errorf("record %q; want %q", got, want)
		}
		if !errors.Is(res.Attempts[1].Err, budget.ErrExhausted) || p.opened() != 1 {
			t.Errorf("the skip says %v; %d streams opened on p", res.Attempts[1].Err, p.opened())
		}
	})
}

package agent_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
)

// model is a provider that answers by a function of the request's
// sequence number and the request, and keeps every request.
type model struct {
	name string
	fn   func(n int, req llm.Request) (*llm.Response, error)
	mu   sync.Mutex
	reqs []llm.Request
}

func (m *model) Name() string { return m.name }

func (m *model) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	m.mu.Lock()
	n := len(m.reqs)
	m.reqs = append(m.reqs, req)
	m.mu.Unlock()
	return m.fn(n, req)
}

// asked returns the requests the model was sent.
func (m *model) asked() []llm.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]llm.Request(nil), m.reqs...)
}

func calls(text string, cs ...llm.ToolCall) *llm.Response {
	return &llm.Response{Text: text, ToolCalls: cs, Finish: llm.FinishToolUse, FinishReason: "tool_use"}
}

func answer(text string) *llm.Response {
	return &llm.Response{Text: text, Finish: llm.FinishStop, FinishReason: "end_turn"}
}

func call(id, name, args string) llm.ToolCall {
	return llm.ToolCall{ID: id, Name: name, Arguments: json.RawMessage(args)}
}

// answered reports whether req ends with tool results.
func answered(req llm.Request) bool {
	last := req.Messages[len(req.Messages)-1]
	return len(last.Parts) > 0 && last.Parts[0].ToolResult != nil
}

// results returns the tool results req ends with.
func results(req llm.Request) []llm.ToolResult {
	var out []llm.ToolResult
	for _, p := range req.Messages[len(req.Messages)-1].Parts {
		if p.ToolResult != nil {
			out = append(out, *p.ToolResult)
		}
	}
	return out
}

// chainOf builds a chain of the models: the first primary, each other
// the next provider.
func chainOf(t *testing.T, ms ...llm.Provider) *chain.Chain {
	t.Helper()
	b := chain.New("agent").Primary(chain.Target{Name: ms[0].Name(), Provider: ms[0], Model: ms[0].Name() + "-model"})
	for _, m := range ms[1:] {
		b.OrProvider(chain.Target{Name: m.Name(), Provider: m, Model: m.Name() + "-model"})
	}
	c, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func loop(t *testing.T, cfg agent.Config) *agent.Loop {
	t.Helper()
	l, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func ask(id, text string) agent.Conversation {
	return agent.Conversation{ID: id, Request: llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}}}
}

// RefundIn and RefundOut are the refund tool's input and output.
type RefundIn struct {
	OrderID string `json:"order_id" jsonschema:"the order to refund"`
	Cents   int    `json:"cents"`
}

type RefundOut struct {
	RefundID string `json:"refund_id"`
	Cents    int    `json:"cents"`
}

// refunds is a payment service: it counts each refund issued, by key.
type refunds struct {
	mu         sync.Mutex
	issued     map[string]int // key → refunds issued
	recovered  int            // Recover calls
	recoveries map[string]int // key → Recover calls
}

func (r *refunds) issue(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.issued == nil {
		r.issued = map[string]int{}
	}
	r.issued[key]++
}

func (r *refunds) count() (n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.issued {
		n += k
	}
	return n
}

// tool returns the refund tool (named "refund" unless cfg names it):
// Once, typed, issuing a refund keyed by its call (run, when set, runs
// first: to block, fail, or hang), and a Recover that looks the refund
// up.
func (r *refunds) tool(t *testing.T, cfg agent.ToolConfig, run func(ctx context.Context, in RefundIn) error) agent.Tool {
	t.Helper()
	if cfg.Name == "" {
		cfg.Name = "refund"
	}
	cfg.Description, cfg.Once = "refunds an order", true
	cfg.Recover = agent.Func(func(ctx context.Context, in RefundIn) (RefundOut, error) {
		c, _ := agent.CallFrom(ctx)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.recovered++
		if r.recoveries == nil {
			r.recoveries = map[string]int{}
		}
		r.recoveries[c.Key]++
		if r.issued[c.Key] == 0 {
			return RefundOut{}, fmt.Errorf("no refund was issued for %s", in.OrderID)
		}
		return RefundOut{RefundID: "r-" + c.Key, Cents: in.Cents}, nil
	})
	tool, err := agent.NewTool(cfg, func(ctx context.Context, in RefundIn) (RefundOut, error) {
		if run != nil {
			if err := run(ctx, in); err != nil {
				return RefundOut{}, err
			}
		}
		c, ok := agent.CallFrom(ctx)
		if !ok || c.Key == "" {
			return RefundOut{}, errors.New("the call has no key")
		}
		r.issue(c.Key)
		return RefundOut{RefundID: "r-" + c.Key, Cents: in.Cents}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tool
}

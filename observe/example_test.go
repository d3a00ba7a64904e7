package observe_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
)

// down is a provider whose every attempt is refused by an overloaded API.
type down struct{}

func (down) Name() string { return "anthropic" }
func (down) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return nil, &llm.Error{Provider: "anthropic", Status: 529, Kind: llm.KindOverloaded}
}

// up is a provider that answers.
type up struct{}

func (up) Name() string { return "openai" }
func (up) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: "hello", Model: req.Model}, nil
}

// Funcs turns plain functions into an observer: here, one line per
// fallback and per call.
func ExampleFuncs() {
	c, err := chain.New("support").
		Primary(chain.Target{Name: "sonnet", Provider: down{}, Model: "claude", Retry: retry.Policy{MaxAttempts: 1}}).
		OrProvider(chain.Target{Name: "gpt", Provider: up{}, Model: "gpt"}).
		Observe(&observe.Funcs{
			OnFallback: func(e observe.Fallback) { fmt.Printf("fallback %s -> %s: %s\n", e.From.Name, e.To.Name, e.Reason) },
			OnCallEnd: func(e observe.CallEnd) {
				fmt.Printf("%s by %s after %d attempts\n", e.Outcome, e.Served.Name, e.Attempts)
			},
		}).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	c.Call(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	// Output:
	// fallback sonnet -> gpt: overloaded
	// served by gpt after 2 attempts
}

// Log writes every decision of the walk as a log/slog record.
func ExampleLog() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelInfo,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "duration" {
				return slog.Attr{}
			}
			return a
		}}))
	c, err := chain.New("support").
		Primary(chain.Target{Name: "sonnet", Provider: down{}, Model: "claude", Retry: retry.Policy{MaxAttempts: 1}}).
		OrProvider(chain.Target{Name: "gpt", Provider: up{}, Model: "gpt"}).
		Observe(observe.Log(logger)).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	c.Call(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	// Output:
	// level=INFO msg="backstop: attempt" chain=support target=sonnet tier=primary n=1 status=529 kind=overloaded cost=$0 error="anthropic: overloaded (HTTP 529)"
	// level=WARN msg="backstop: fallback" chain=support from=sonnet to=gpt reason=overloaded
	// level=INFO msg="backstop: call" chain=support outcome=served attempts=2 served=gpt tier=provider model=gpt cost=$0
}

// Join makes one observer of several, each told every event in turn: here,
// your own metrics beside a log, handed on as one observer wherever one is
// taken.
func ExampleJoin() {
	fallbacks := 0
	metrics := &observe.Funcs{OnFallback: func(observe.Fallback) { fallbacks++ }}
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}}))
	both := observe.Join(metrics, observe.Log(logger))
	c, err := chain.New("support").
		Primary(chain.Target{Name: "sonnet", Provider: down{}, Model: "claude", Retry: retry.Policy{MaxAttempts: 1}}).
		OrProvider(chain.Target{Name: "gpt", Provider: up{}, Model: "gpt"}).
		Observe(both).
		Build()
	if err != nil {
		fmt.Println(err)
		return
	}
	c.Call(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "hi"}}})
	fmt.Println("fallbacks:", fallbacks)
	// Output:
	// level=WARN msg="backstop: fallback" chain=support from=sonnet to=gpt reason=overloaded
	// fallbacks: 1
}

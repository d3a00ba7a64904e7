package chain_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/retry"
)

// incident builds a chain whose primary is overloaded three times (the
// first attempt and both retries) and whose backup serves, observed by obs.
func incident(t *testing.T, obs ...observe.Observer) *chain.Chain {
	t.Helper()
	var n atomic.Int32
	primary := &stub{name: "anthropic", fn: func(context.Context, llm.Request) (*llm.Response, error) {
		n.Add(1)
		return nil, &llm.Error{Provider: "anthropic", Status: 529, Kind: llm.KindOverloaded, Type: "overloaded_error",
			RequestID: fmt.Sprintf("req_%d", n.Load())}
	}}
	backup := &stub{name: "openai", fn: func(context.Context, llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: "ok", Model: "gpt-test", RequestID: "req_b1"}, nil
	}}
	c, err := chain.New("support").
		Primary(chain.Target{Name: "sonnet", Provider: primary, Model: "claude-test",
			Retry: retry.Policy{Base: 500 * time.Millisecond, Jitter: retry.NoJitter}}).
		OrProvider(chain.Target{Name: "gpt", Provider: backup, Model: "gpt-test"}).
		Observe(obs...).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestObserverSeesEveryDecisionInOrder: a call retried twice, fallen back
// and served produces exactly this sequence of events, each attempt's end
// with the provider's request-id, the failures' too.
func TestObserverSeesEveryDecisionInOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		add := func(format string, args ...any) { got = append(got, fmt.Sprintf(format, args...)) }
		c := incident(t, &observe.Funcs{
			OnCallStart: func(e observe.CallStart) { add("call start %s", e.Chain) },
			OnAttemptStart: func(e observe.AttemptStart) {
				add("attempt start %s #%d model %s", e.Target.Name, e.N, e.Request.Model)
			},
			OnAttemptEnd: func(e observe.AttemptEnd) {
				add("attempt end %s #%d status %d kind %v request-id %s", e.Target.Name, e.N, e.Status, e.Kind, e.RequestID)
			},
			OnRetry:    func(e observe.Retry) { add("retry %s after #%d: %v, wait %v", e.Target.Name, e.N, e.Kind, e.Wait) },
			OnSkip:     func(e observe.Skip) { add("skip %s: %v", e.Target.Name, e.Cause) },
			OnFallback: func(e observe.Fallback) { add("fallback %s -> %s: %s", e.From.Name, e.To.Name, e.Reason) },
			OnCallEnd: func(e observe.CallEnd) {
				add("call end %s by %s (%s), %d attempts", e.Outcome, e.Served.Name, e.Served.Tier, e.Attempts)
			},
		})
		res, err := c.Call(t.Context(), hi)
		if err != nil || res.Served.Target != "gpt" {
			t.Fatalf("%v, %+v", err, res.Served)
		}
		want := []string{
			"call start support",
			"attempt start sonnet #1 model claude-test",
			"attempt end sonnet #1 status 529 kind overloaded request-id req_1",
			"retry sonnet after #1: overloaded, wait 500ms",
			"attempt start sonnet #2 model claude-test",
			"attempt end sonnet #2 status 529 kind overloaded request-id req_2",
			"retry sonnet after #2: overloaded, wait 1s",
			"attempt start sonnet #3 model claude-test",
			"attempt end sonnet #3 status 529 kind overloaded request-id req_3",
			"fallback sonnet -> gpt: overloaded",
			"attempt start gpt #1 model gpt-test",
			"attempt end gpt #1 status 200 kind unknown request-id req_b1",
			"call end served by gpt (provider), 4 attempts",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// TestLogObserver: observe.Log's records for the same call, as
// docs/operations.md shows them.
func TestLogObserver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf bytes.Buffer
		logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug,
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}}))
		c := incident(t, observe.Log(logger))
		if _, err := c.Call(t.Context(), hi); err != nil {
			t.Fatal(err)
		}
		want := `level=INFO msg="backstop: attempt" chain=support target=sonnet tier=primary n=1 status=529 kind=overloaded request_id=req_1 duration=0s cost=$0 error="anthropic: overloaded (HTTP 529) overloaded_error [request-id req_1]"
level=INFO msg="backstop: retry" chain=support target=sonnet n=1 kind=overloaded wait=500ms
level=INFO msg="backstop: attempt" chain=support target=sonnet tier=primary n=2 status=529 kind=overloaded request_id=req_2 duration=0s cost=$0 error="anthropic: overloaded (HTTP 529) overloaded_error [request-id req_2]"
level=INFO msg="backstop: retry" chain=support target=sonnet n=2 kind=overloaded wait=1s
level=INFO msg="backstop: attempt" chain=support target=sonnet tier=primary n=3 status=529 kind=overloaded request_id=req_3 duration=0s cost=$0 error="anthropic: overloaded (HTTP 529) overloaded_error [request-id req_3]"
level=WARN msg="backstop: fallback" chain=support from=sonnet to=gpt reason=overloaded
level=DEBUG msg="backstop: attempt" chain=support target=gpt tier=provider n=1 status=200 request_id=req_b1 duration=0s cost=$0
level=INFO msg="backstop: call" chain=support outcome=served attempts=4 served=gpt tier=provider model=gpt-test request_id=req_b1 cost=$0
`
		if got := buf.String(); got != want {
			t.Errorf("log:\n%s\nwant:\n%s", got, want)
		}
	})
}

// TestPanicAtAttemptStartGivesBackItsTicket: an observer that panics as
// an attempt starts leaves nothing held: the half-open breaker's probe
// slot the attempt took is given back, and the next call probes. Alone,
// or after another observer that started observing the attempt.
func TestPanicAtAttemptStartGivesBackItsTicket(t *testing.T) {
	t.Run("alone", func(t *testing.T) { panicAtAttemptStart(t) })
	t.Run("second", func(t *testing.T) { panicAtAttemptStart(t, &observe.Funcs{}) })
}

func panicAtAttemptStart(t *testing.T, before ...observe.Observer) {
	synctest.Test(t, func(t *testing.T) {
		var armed, down atomic.Bool
		obs := &observe.Funcs{OnAttemptStart: func(observe.AttemptStart) {
			if armed.Load() {
				panic("observer")
			}
		}}
		p := &stub{name: "eu-1", fn: func(ctx context.Context, req llm.Request) (*llm.Response, error) {
			if down.Load() {
				return fails(ctx)
			}
			return answers(ctx)
		}}
		c, err := chain.New("c").Observe(append(before, obs)...).Primary(chain.Target{Name: "eu-1", Provider: p, Model: "m",
			Retry: retry.Policy{MaxAttempts: 1}}).Build()
		if err != nil {
			t.Fatal(err)
		}
		down.Store(true)
		for open := false; !open; { // failing calls, until the breaker opens
			// A second's deadline: the call cannot wait for the probe.
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			res, _ := c.Call(ctx, question)
			cancel()
			open = res.Attempts[0].Decision == chain.DecisionSkip
		}
		down.Store(false)
		time.Sleep(time.Minute) // due to probe
		armed.Store(true)
		mustPanic(t, c, "observer")
		armed.Store(false)
		if res, err := c.Call(t.Context(), question); err != nil || res.Served.Target != "eu-1" {
			t.Fatalf("eu-1 was not probed after the panic: %v %v", err, res.Attempts)
		}
	})
}

// TestEveryObserverSeesTheCall: with several observers, each that
// observes the call sees every event, in the order Observe was given
// them; one that observes nothing of it (a Log above Warn) is passed over.
func TestEveryObserverSeesTheCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var got []string
		tell := func(name string) *observe.Funcs {
			return &observe.Funcs{
				OnAttemptStart: func(e observe.AttemptStart) { got = append(got, name+" attempt "+e.Target.Name) },
				OnFallback:     func(e observe.Fallback) { got = append(got, name+" fallback "+e.From.Name) },
				OnCallEnd:      func(e observe.CallEnd) { got = append(got, name+" end "+e.Outcome) },
			}
		}
		quiet := observe.Log(slog.New(slog.NewTextHandler(&bytes.Buffer{}, &slog.HandlerOptions{Level: slog.LevelError + 1})))
		c := incident(t, tell("a"), quiet, tell("b"))
		if _, err := c.Call(t.Context(), hi); err != nil {
			t.Fatal(err)
		}
		want := []string{
			"a attempt sonnet", "b attempt sonnet", "a attempt sonnet", "b attempt sonnet", "a attempt sonnet", "b attempt sonnet",
			"a fallback sonnet", "b fallback sonnet", "a attempt gpt", "b attempt gpt", "a end served", "b end served",
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// refuser is an observer that refuses every chain it is bound to.
type refuser struct{ observe.Funcs }

func (*refuser) Bind(string, []observe.Target) error { return errRefused }

var errRefused = errors.New("no room for another chain")

// TestObserverRefusingTheChainFailsBuild: an observer whose Bind returns
// an error fails Build with a ConfigError that names it.
func TestObserverRefusingTheChainFailsBuild(t *testing.T) {
	_, err := chain.New("c").Observe(&observe.Funcs{}, &refuser{}).
		Primary(chain.Target{Name: "a", Provider: &stub{name: "p"}, Model: "m"}).Build()
	var ce *chain.ConfigError
	if !errors.Is(err, errRefused) || !errors.As(err, &ce) || !strings.Contains(err.Error(), "*chain_test.refuser") {
		t.Fatalf("Build: %v", err)
	}
}

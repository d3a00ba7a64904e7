// Command agent runs a refund agent through package agent's tool loop and
// shows that its refund runs exactly once, through a provider outage, a
// failover mid-conversation and the caller's retry of the whole request.
//
// The agent has two tools: order_status, read-only, and refund, marked
// Once: each of its executions is keyed by its place in the conversation
// (conversation id / step / call index), and a ledger records it started,
// then done with its result. The refund hands that key to the payment
// system as its idempotency key, and its Recover looks the refund up by it
// when an execution's outcome is unknown. The payment system is an
// in-process map standing in for a payments API; it counts the refund
// requests it receives.
//
// The scenario, on backstop's fake provider (Anthropic's and OpenAI's wire
// formats, on loopback):
//
//  1. The customer asks for a refund. Claude (the primary) looks the
//     order up, then calls refund; the payment system issues the refund.
//  2. Asked to finish, Claude is overloaded (529, twice): the chain falls
//     back to OpenAI, which finishes the conversation, tool calls and
//     results included, under the ids the loop gave them.
//  3. The service's own client gave up before the answer reached it, so
//     the service retries the whole request with the same conversation
//     id. The loop replays the two recorded steps from the ledger: the
//     model is not asked for them again, order_status (read-only) runs
//     again, and the refund is replayed, not run again. Claude, back,
//     writes the answer.
//
// It prints each model request (per provider), each ledger record, each
// tool execution and replay, each run's answer and cost, and the payment
// system's count: one refund. It exits with an error if the refund ran
// more than once (or, on the fake provider, if anything above did not
// happen as described).
//
//	go run ./examples/agent
//
// The ledger is ledger.NewMemory() (one process). With $BACKSTOP_REDIS_ADDR
// set to the host:port of a Redis that answers a PING, it is the shared
// ledger of many replicas instead: ledger.NewShared over redisstore's
// Store.Ledger, under keys unique to the run, deleted at the end.
//
// With ANTHROPIC_API_KEY and OPENAI_API_KEY both set, the same loop runs
// against the real APIs: no outage is injected there, and the model
// decides which tools it calls.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/backstop-llm/backstop/agent"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/ledger"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/observe"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/openai"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
)

const (
	sonnet = "claude-sonnet-4-5"
	gpt    = "gpt-4.1-mini"

	conversation = "ticket-42"
	question     = "Order A-1001 arrived broken. Please refund it."

	envRedis    = "BACKSTOP_REDIS_ADDR"
	pingTimeout = time.Second
)

func main() {
	log.SetFlags(0)
	o := options{Loopback: true, AnthropicKey: os.Getenv("ANTHROPIC_API_KEY"), OpenAIKey: os.Getenv("OPENAI_API_KEY")}
	led, says, done, err := pickLedger()
	if err != nil {
		log.Fatal(err)
	}
	o.Ledger, o.LedgerSays = led, says
	err = run(context.Background(), os.Stdout, o)
	done()
	if err != nil {
		log.Fatal(err)
	}
}

// options configure run.
type options struct {
	// Ledger records the refunds; nil means ledger.NewMemory().
	Ledger ledger.Ledger
	// LedgerSays names the ledger in the first lines of the output.
	LedgerSays string
	// Retry, when set, is the ledger of the retried request (the tests:
	// a retry that lands on a replica whose ledger is not shared).
	Retry ledger.Ledger
	// Loopback serves the fakes on loopback (go run); false serves them
	// in process (the tests, in testing/synctest bubbles).
	Loopback bool
	// AnthropicKey and OpenAIKey, both set, call the real APIs instead
	// of the fakes.
	AnthropicKey, OpenAIKey string
}

// run plays the scenario and prints it to w.
func run(ctx context.Context, w io.Writer, o options) error {
	if o.Ledger == nil {
		o.Ledger = ledger.NewMemory()
		o.LedgerSays = "in process (ledger.NewMemory); set $" + envRedis + " to a Redis's host:port to share it on Redis"
	}
	out := &printer{w: w}
	pay := &payments{out: out}

	m, err := newModels(o)
	if err != nil {
		return err
	}
	defer m.close()
	fmt.Fprintln(w, "A refund agent whose primary fails after the refund ran, and whose caller retries the whole request.")
	fmt.Fprintln(w, "Ledger:", o.LedgerSays+".")
	fmt.Fprintln(w, "Models:", m.says+".")

	c, err := chain.New("refund-agent").Deadline(60 * time.Second).
		Observe(out.models()).
		Primary(chain.Target{Name: "sonnet", Provider: m.claude, Model: sonnet, Params: llm.Params{MaxTokens: 500},
			Retry: retry.Policy{MaxAttempts: 2, Base: 50 * time.Millisecond}}).
		OrProvider(chain.Target{Name: "gpt", Provider: m.gpt, Model: gpt, Params: llm.Params{MaxTokens: 500}}).
		Build()
	if err != nil {
		return err
	}
	tools, err := pay.tools()
	if err != nil {
		return err
	}
	loop, err := agent.New(agent.Config{Chain: c, Tools: tools, Ledger: shownLedger{o.Ledger, out}, Owner: "support-1"})
	if err != nil {
		return err
	}
	conv := agent.Conversation{ID: conversation, Request: llm.Request{
		System:   "You are a support agent. Look an order up before refunding it; refund only what was paid.",
		Messages: []llm.Message{{Role: llm.RoleUser, Content: question}},
	}}

	fmt.Fprintf(w, "\nRequest 1: conversation %s, %q\n", conv.ID, question)
	first, err := loop.Run(ctx, conv)
	if err != nil {
		return fmt.Errorf("request 1: %w", err)
	}
	out.result(first)

	fmt.Fprintln(w, "\nThe service's own client gave up before the answer reached it: the service retries the whole request,")
	fmt.Fprintln(w, "with the same conversation id and the same messages.")
	fmt.Fprintf(w, "\nRequest 2: conversation %s again\n", conv.ID)
	if o.Retry != nil {
		loop, err = agent.New(agent.Config{Chain: c, Tools: tools, Ledger: shownLedger{o.Retry, out}, Owner: "support-2"})
		if err != nil {
			return err
		}
	}
	second, err := loop.Run(ctx, conv)
	if err != nil {
		return fmt.Errorf("request 2: %w", err)
	}
	out.result(second)

	fmt.Fprintln(w)
	var errs []error
	if !o.real() {
		errs = append(errs, m.check(w, first, second))
	}
	errs = append(errs, pay.check(w))
	return errors.Join(errs...)
}

// real reports whether o calls the real APIs.
func (o options) real() bool { return o.AnthropicKey != "" && o.OpenAIKey != "" }

// printer writes the account, one line per thing that happened, each
// with the step it belongs to.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) line(step int, who, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "  step %d  %-8s  %s\n", step, who, fmt.Sprintf(format, args...))
}

// models is the chain's observer: it prints each model request as it
// ends. The step is the number of messages the request carried.
func (p *printer) models() observe.Observer {
	step := 0
	return &observe.Funcs{
		OnAttemptStart: func(e observe.AttemptStart) { step = len(e.Request.Messages) },
		OnAttemptEnd: func(e observe.AttemptEnd) {
			what := "ok, answers"
			switch {
			case e.Err != nil && e.Status != 0:
				what = fmt.Sprintf("%d %s", e.Status, e.Kind)
			case e.Err != nil:
				what = e.Kind.String()
			case e.Response != nil && len(e.Response.ToolCalls) > 0:
				var calls []string
				for _, tc := range e.Response.ToolCalls {
					calls = append(calls, tc.Name+" "+string(tc.Arguments))
				}
				what = "ok, calls " + strings.Join(calls, ", ")
			}
			p.line(step, "model", "%s (%s) #%d: %s", e.Target.Name, e.Target.Provider, e.N, what)
		},
	}
}

// result prints what a Run returned: each step's calls, the answer and
// the cost.
func (p *printer) result(res *agent.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	served := "nobody"
	if n := len(res.Calls); n > 0 {
		s := res.Calls[n-1].Served
		served = s.Target + " on " + s.Provider
	}
	attempts := 0
	for _, c := range res.Calls {
		attempts += len(c.Attempts)
	}
	fmt.Fprintf(p.w, "  Run returned: %d %s, the answer from %s, cost %s for %d model %s (%d %s).\n",
		len(res.Steps), plural(len(res.Steps), "step", "steps"), served, res.Cost(),
		len(res.Calls), plural(len(res.Calls), "call", "calls"), attempts, plural(attempts, "attempt", "attempts"))
	for _, st := range res.Steps {
		from := "asked of the model"
		if st.Replayed {
			from = "replayed from the ledger"
		}
		for _, r := range st.Calls {
			how := "ran"
			switch {
			case r.Replayed:
				how = "replayed from the ledger, not run again"
			case r.Recovered:
				how = "outcome unknown: answered by its Recover"
			case st.Replayed:
				how = "ran again (read-only: safe to repeat)"
			}
			fmt.Fprintf(p.w, "    step %d (%s): %s %s %s -> %s\n", st.Index, from, r.Call.Name, r.Call.ID, how, r.Output)
		}
	}
	fmt.Fprintf(p.w, "    answer: %s\n", res.Text)
}

func plural(n int, one, more string) string {
	if n == 1 {
		return one
	}
	return more
}

// shownLedger is the loop's ledger, printing what it records and what it
// replays. Keys are <conversation>/<step> for a step, and
// <conversation>/<step>/<index> for a Once call (see package agent).
type shownLedger struct {
	ledger.Ledger
	out *printer
}

func (l shownLedger) Get(ctx context.Context, key string) (ledger.Entry, error) {
	e, err := l.Ledger.Get(ctx, key)
	if step, call := place(key); err == nil && e.State == ledger.Done && !call {
		l.out.line(step, "ledger", "%s done: the step is replayed from the ledger, the model is not asked for it", key)
	}
	return e, err
}

func (l shownLedger) Begin(ctx context.Context, key, owner string, lease time.Duration, takeover bool) (ledger.Entry, error) {
	e, err := l.Ledger.Begin(ctx, key, owner, lease, takeover)
	if step, call := place(key); err == nil && call {
		switch {
		case e.State == ledger.Absent:
			l.out.line(step, "ledger", "%s started by %s: the tool runs", key, owner)
		case e.State == ledger.Done:
			l.out.line(step, "ledger", "%s done: the call's recorded result is replayed, the tool is not run again", key)
		case e.Expired(time.Now()):
			l.out.line(step, "ledger", "%s started, its lease ended: outcome unknown", key)
		}
	}
	return e, err
}

func (l shownLedger) Finish(ctx context.Context, key, owner string, result []byte, ttl time.Duration) error {
	err := l.Ledger.Finish(ctx, key, owner, result, ttl)
	if step, call := place(key); err == nil {
		if call {
			l.out.line(step, "ledger", "%s done: its result recorded", key)
		} else {
			l.out.line(step, "ledger", "%s recorded: the turn's calls, before they run", key)
		}
	}
	return err
}

// place reads a ledger key: its step, and whether it is a call's.
func place(key string) (step int, call bool) {
	parts := strings.Split(key, "/")
	call = len(parts) == 3
	step, _ = strconv.Atoi(parts[1])
	return step, call
}

// payments stands in for a payment system: refunds by idempotency key.
type payments struct {
	out *printer

	mu       sync.Mutex
	requests int               // refund requests received
	byKey    map[string]Refund // refunds issued, by idempotency key
}

// Refund is a refund the payment system issued.
type Refund struct {
	ID      string `json:"refund_id"`
	OrderID string `json:"order_id"`
	Cents   int    `json:"cents"`
}

// refund issues a refund, or returns the one issued under key.
func (p *payments) refund(key, order string, cents int) Refund {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests++
	if r, ok := p.byKey[key]; ok {
		return r
	}
	if p.byKey == nil {
		p.byKey = map[string]Refund{}
	}
	r := Refund{ID: "r_" + strconv.Itoa(len(p.byKey)+1), OrderID: order, Cents: cents}
	p.byKey[key] = r
	return r
}

// lookup returns the refund issued under key.
func (p *payments) lookup(key string) (Refund, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.byKey[key]
	return r, ok
}

// RefundInput is the refund tool's input.
type RefundInput struct {
	OrderID string `json:"order_id" jsonschema:"the order to refund"`
	Cents   int    `json:"cents" jsonschema:"the amount to refund, in cents"`
}

// StatusInput is the order_status tool's input.
type StatusInput struct {
	OrderID string `json:"order_id" jsonschema:"the order to look up"`
}

// Status is what order_status answers.
type Status struct {
	OrderID   string `json:"order_id"`
	State     string `json:"state"`
	PaidCents int    `json:"paid_cents"`
}

// tools returns the agent's tools: order_status, read-only, and refund,
// Once, through the payment system.
func (p *payments) tools() ([]agent.Tool, error) {
	status, err := agent.NewTool(agent.ToolConfig{Name: "order_status", Description: "Looks an order up: its state and what was paid."},
		func(ctx context.Context, in StatusInput) (Status, error) {
			call, _ := agent.CallFrom(ctx)
			p.out.line(call.Step, "orders", "%s looked up (read-only)", in.OrderID)
			return Status{OrderID: in.OrderID, State: "delivered, reported damaged", PaidCents: 2599}, nil
		})
	if err != nil {
		return nil, err
	}
	refund, err := agent.NewTool(agent.ToolConfig{
		Name:        "refund",
		Description: "Refunds an order to the card it was paid with.",
		Once:        true,
		// Recover answers a refund whose outcome is unknown (its replica
		// died, or the payment API did not answer in time): it looks the
		// refund up by the call's key, and issues it only if none was.
		Recover: agent.Func(func(ctx context.Context, in RefundInput) (Refund, error) {
			call, _ := agent.CallFrom(ctx)
			if r, ok := p.lookup(call.Key); ok {
				p.out.line(call.Step, "payments", "refund %s found under idempotency key %s", r.ID, call.Key)
				return r, nil
			}
			return p.issue(call, in), nil
		}),
		Timeout: 10 * time.Second,
	}, func(ctx context.Context, in RefundInput) (Refund, error) {
		call, _ := agent.CallFrom(ctx)
		return p.issue(call, in), nil
	})
	if err != nil {
		return nil, err
	}
	return []agent.Tool{status, refund}, nil
}

// issue asks the payment system for the call's refund, under the call's
// key as the idempotency key.
func (p *payments) issue(call agent.Call, in RefundInput) Refund {
	r := p.refund(call.Key, in.OrderID, in.Cents)
	p.out.line(call.Step, "payments", "refund %s issued: %d cents on %s (idempotency key %s)", r.ID, r.Cents, r.OrderID, call.Key)
	return r
}

// check prints the payment system's count, and fails unless the refund
// ran at most once.
func (p *payments) check(w io.Writer) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ids []string
	for _, r := range p.byKey {
		ids = append(ids, r.ID)
	}
	fmt.Fprintf(w, "Payment system: %d refund %s received, %d %s issued (%s).\n", p.requests,
		plural(p.requests, "request", "requests"), len(p.byKey), plural(len(p.byKey), "refund", "refunds"), strings.Join(ids, ", "))
	switch p.requests {
	case 0:
		fmt.Fprintln(w, "The model called no refund.")
		return nil
	case 1:
		fmt.Fprintln(w, "The refund ran exactly once, through the outage, the failover and the retry.")
		return nil
	}
	return fmt.Errorf("the refund tool ran %d times: it must run once", p.requests)
}

// models are the two providers the chain calls, and on the fake provider
// the fakes behind them.
type models struct {
	claude, gpt llm.Provider
	says        string
	ant, oai    *fake.Server // nil on the real APIs
}

// newModels returns the providers: the fakes, scripted for the scenario,
// unless o calls the real APIs.
func newModels(o options) (*models, error) {
	m := &models{}
	var err error
	if o.real() {
		m.says = "the real Anthropic and OpenAI APIs (no outage is injected: the model decides what it calls)"
		if m.claude, err = anthropic.New(anthropic.Config{APIKey: o.AnthropicKey}); err != nil {
			return nil, err
		}
		m.gpt, err = openai.New(openai.Config{APIKey: o.OpenAIKey})
		return m, err
	}
	m.ant, m.oai = fake.New(), fake.New()
	m.says = "backstop's fake provider, in process"
	if o.Loopback {
		m.says = "backstop's fake provider on loopback; set ANTHROPIC_API_KEY and OPENAI_API_KEY to call the real APIs"
		for _, s := range []*fake.Server{m.ant, m.oai} {
			if err := s.Start(); err != nil {
				m.close()
				return nil, err
			}
		}
	}
	// The fakes answer as the model would, from the conversation so far
	// (the tool results it carries), so that a request replayed from the
	// ledger and one asked anew get the same answers.
	var mu sync.Mutex
	finishing := 0 // Claude's requests for the answer so far
	m.ant.Handle(sonnet, func(c fake.Call) fake.Outcome {
		switch len(c.ToolResults) {
		case 0:
			return fake.Answer("Let me look the order up.").
				ToolCalls(fake.ToolCall{Name: "order_status", Arguments: `{"order_id":"A-1001"}`}).Usage(900, 30)
		case 1:
			return fake.Answer("It was delivered damaged; I am refunding the $25.99 paid.").
				ToolCalls(fake.ToolCall{Name: "refund", Arguments: `{"order_id":"A-1001","cents":2599}`}).Usage(1000, 45)
		}
		mu.Lock()
		finishing++
		n := finishing
		mu.Unlock()
		if n <= 2 { // the outage: Claude fails both attempts of request 1's last turn
			return fake.Overloaded()
		}
		return fake.Answer(fmt.Sprintf("Your refund of $25.99 for order A-1001 is issued (refund %s); it reaches your card in 3 to 5 days.",
			refundID(c.ToolResults))).Usage(1150, 30)
	})
	m.oai.Handle(gpt, func(c fake.Call) fake.Outcome {
		return fake.Answer(fmt.Sprintf("I have refunded $25.99 for order A-1001 (refund %s). You will see it on your card within 5 days.",
			refundID(c.ToolResults))).Usage(1100, 32)
	})
	ac, oc := anthropic.Config{APIKey: "fake-key", BaseURL: m.ant.URL()}, openai.Config{APIKey: "fake-key", BaseURL: m.oai.URL()}
	if !o.Loopback {
		ac.HTTPClient, oc.HTTPClient = m.ant.Client(), m.oai.Client()
	}
	if m.claude, err = anthropic.New(ac); err == nil {
		m.gpt, err = openai.New(oc)
	}
	if err != nil {
		m.close()
		return nil, err
	}
	return m, nil
}

func (m *models) close() {
	for _, s := range []*fake.Server{m.ant, m.oai} {
		if s != nil {
			s.Close()
		}
	}
}

// check prints what the fakes received and fails unless the scenario
// went as described: the refund ran in request 1 and was replayed in
// request 2, whose only model request was for the answer, carrying the
// recorded tool results.
func (m *models) check(w io.Writer, first, second *agent.Result) error {
	a, g := m.ant.Calls(sonnet), m.oai.Calls(gpt)
	fmt.Fprintf(w, "Requests received: Anthropic %d, OpenAI %d.\n", len(a), len(g))
	var problems []string
	if len(a) != 5 || len(g) != 1 {
		problems = append(problems, fmt.Sprintf("want 5 requests to Anthropic and 1 to OpenAI, got %d and %d", len(a), len(g)))
	} else {
		fmt.Fprintf(w, "OpenAI's request carried the tool results %s: it finished Claude's conversation.\n", resultIDs(g[0]))
		fmt.Fprintf(w, "Request 2 asked the model once, for the answer, with the recorded tool results %s.\n", resultIDs(a[4]))
	}
	if first.Text == "" || len(first.Steps) != 2 || first.Steps[0].Replayed || first.Steps[1].Replayed {
		problems = append(problems, "request 1 should run two steps and answer")
	}
	if len(second.Steps) != 2 || !second.Steps[0].Replayed || !second.Steps[1].Replayed ||
		len(second.Steps[1].Calls) != 1 || !second.Steps[1].Calls[0].Replayed {
		problems = append(problems, "request 2 should replay both steps and the refund")
	}
	if len(second.Calls) != 1 {
		problems = append(problems, fmt.Sprintf("request 2 should ask the model once, not %d times", len(second.Calls)))
	}
	if len(problems) > 0 {
		return errors.New("the scenario did not go as described: " + strings.Join(problems, "; "))
	}
	return nil
}

// refundID returns the refund id in a request's tool results.
func refundID(results []fake.ToolResult) string {
	for _, r := range results {
		var out Refund
		if json.Unmarshal([]byte(r.Content), &out) == nil && out.ID != "" {
			return out.ID
		}
	}
	return "unknown"
}

// resultIDs lists the ids of the tool results a request carried.
func resultIDs(c fake.Call) string {
	var ids []string
	for _, r := range c.ToolResults {
		ids = append(ids, r.ID)
	}
	return strings.Join(ids, " and ")
}

// pickLedger returns the ledger: on Redis when $BACKSTOP_REDIS_ADDR names
// one that answers, else in process; and what to call at the end.
func pickLedger() (led ledger.Ledger, says string, done func(), err error) {
	none := func() {}
	addr := os.Getenv(envRedis)
	if addr == "" {
		return nil, "", none, nil
	}
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: pingTimeout, ContextTimeoutEnabled: true})
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	perr := client.Ping(ctx).Err()
	cancel()
	if perr != nil {
		_ = client.Close()
		return ledger.NewMemory(), fmt.Sprintf("in process (ledger.NewMemory): no Redis answered at $%s=%s (%v)", envRedis, addr, perr), none, nil
	}
	store, err := redisstore.New(client)
	if err != nil {
		_ = client.Close()
		return nil, "", none, err
	}
	var b [4]byte
	rand.Read(b[:])
	name := "backstop-example-agent-" + hex.EncodeToString(b[:])
	shared, err := ledger.NewShared(store.Ledger(name), ledger.SharedConfig{})
	if err != nil {
		_ = client.Close()
		return nil, "", none, err
	}
	done = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := client.Scan(ctx, 0, name+":*", 100).Iterator()
		for iter.Next(ctx) {
			client.Del(ctx, iter.Val())
		}
		_ = client.Close()
	}
	return shared, fmt.Sprintf("shared on Redis at %s (ledger.NewShared over redisstore's Store.Ledger), keys under %s:*, deleted at the end", addr, name), done, nil
}

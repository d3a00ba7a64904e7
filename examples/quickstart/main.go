// Command quickstart replays a small incident through a backstop chain and
// prints each call's path: the targets tried, their statuses, the waits,
// who served, and what the call cost; at the end, what the incident cost
// and by which decision (retries, re-asks, fallbacks, hedges). Prices are
// the model catalogue's.
//
// With no API key set it runs against backstop's fake provider on loopback:
//
//	go run ./examples/quickstart
//
// With ANTHROPIC_API_KEY or OPENAI_API_KEY set, it sends the same chain's
// calls to the real APIs instead (no faults are injected there).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/cost"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/openai"
	"github.com/backstop-llm/backstop/retry"
)

const (
	sonnet = "claude-sonnet-4-5"
	haiku  = "claude-haiku-4-5"
	gpt    = "gpt-4.1-mini"
)

func main() {
	log.SetFlags(0)
	ctx := context.Background()
	if os.Getenv("ANTHROPIC_API_KEY") != "" || os.Getenv("OPENAI_API_KEY") != "" {
		if err := real(ctx); err != nil {
			log.Fatal(err)
		}
		return
	}
	if err := replay(ctx); err != nil {
		log.Fatal(err)
	}
}

// replay runs the incident on three fake deployments: two of Anthropic's
// API (eu1 also serves the sibling model) and one of OpenAI's.
func replay(ctx context.Context) error {
	eu1, eu2, oai := fake.New(), fake.New(), fake.New()
	for _, s := range []*fake.Server{eu1, eu2, oai} {
		if err := s.Start(); err != nil {
			return err
		}
		defer s.Close()
	}
	c, err := build(
		mustAnthropic(anthropic.Config{APIKey: "fake-key", BaseURL: eu1.URL()}),
		mustAnthropic(anthropic.Config{APIKey: "fake-key", BaseURL: eu2.URL()}),
		mustOpenAI(openai.Config{APIKey: "fake-key", BaseURL: oai.URL()}),
	)
	if err != nil {
		return err
	}
	fmt.Println("Replaying an incident on backstop's fake provider (set ANTHROPIC_API_KEY or OPENAI_API_KEY to call the real APIs).")
	var spent ledger

	fmt.Println("\n1. A malformed request fails fast: sent once, never retried, never passed on.")
	eu1.Script(sonnet, fake.BadRequest("messages.0.content: text content blocks must be non-empty"))
	spent.add(call(ctx, c, ask("Hello?")))

	// The answers report the usage of a support prompt (instructions and
	// the customer's history, 3,000 tokens), priced at the catalogue's
	// prices for each model.
	fmt.Println("\n2. The primary deployment is overloaded; the second deployment is rate limited; the sibling model answers.")
	eu1.Script(sonnet, fake.Overloaded())
	eu2.Script(sonnet, fake.RateLimited("1"), fake.RateLimited("45"))
	eu1.Script(haiku, fake.Answer("Your order left the warehouse this morning.").Usage(3000, 12))
	spent.add(call(ctx, c, ask("Where is my order?")))

	fmt.Println("\n3. Every model is down: the primary's breaker opens, the second deployment is still closed by its Retry-After, and the degradation answers.")
	eu1.Script(haiku, fake.ServerError(), fake.ServerError(), fake.ServerError())
	oai.Script(gpt, fake.Status(503))
	spent.add(call(ctx, c, ask("Can I change my delivery address?")))

	fmt.Println("\n4. The sibling has recovered. The chain remembers the rest: the primary (breaker open) and the second deployment (Retry-After) are skipped without a request.")
	eu1.Script(haiku, fake.Answer("Yes: reply with the new address and we will update it.").Usage(3000, 14))
	spent.add(call(ctx, c, ask("Can I change my delivery address?")))

	fmt.Println("\n5. The sibling calls the order tool with an argument its schema does not allow: the chain re-asks once, and the broken answer was billed.")
	eu1.Script(haiku,
		fake.CallTools(fake.ToolCall{Name: "track_order", Arguments: `{"order": 1234}`}).Usage(3100, 25),
		fake.CallTools(fake.ToolCall{Name: "track_order", Arguments: `{"order_id": "1234"}`}).Usage(3200, 25))
	spent.add(call(ctx, c, withTool(ask("Where is order 1234?"))))

	fmt.Printf("\nRequests received: sonnet on eu-1 %d, sonnet on eu-2 %d, haiku %d, gpt %d.\n",
		eu1.Requests(sonnet), eu2.Requests(sonnet), eu1.Requests(haiku), oai.Requests(gpt))
	fmt.Printf("The incident cost %s: %s.\n", spent.total(), &spent)
	return nil
}

func ask(question string) llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: question}}}
}

// withTool gives req the tool that tracks an order; the chain checks each
// call's arguments against its schema.
func withTool(req llm.Request) llm.Request {
	req.Tools = []llm.Tool{{Name: "track_order", Description: "Where an order is.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"],"additionalProperties":false}`)}}
	return req
}

// ledger is what calls cost, by what the chain did after each attempt:
// the answers served, and what the incident added beyond them.
type ledger struct {
	served cost.Cost
	by     [nDecisions]struct {
		n    int
		cost cost.Cost
	}
}

// The decisions an incident's cost is split by.
const (
	retried = iota
	reasked
	fellBack
	lostRace
	stopped
	nDecisions
)

var decisionNames = [nDecisions][2]string{{"retry", "retries"}, {"re-ask", "re-asks"}, {"fallback", "fallbacks"},
	{"lost hedge", "lost hedges"}, {"stop", "stops"}}

// add records what res's attempts cost: the one that served, and each
// other by the decision taken after it. Skips sent nothing and cost
// nothing.
func (l *ledger) add(res *chain.Result) {
	for _, a := range res.Attempts {
		d := -1
		switch a.Decision {
		case chain.DecisionServed:
			l.served = l.served.Add(a.Cost)
		case chain.DecisionRetry:
			d = retried
			if a.Kind == llm.KindInvalidOutput {
				d = reasked
			}
		case chain.DecisionNext:
			d = fellBack
		case chain.DecisionLost:
			d = lostRace
		case chain.DecisionStop:
			d = stopped
		}
		if d >= 0 {
			l.by[d].n++
			l.by[d].cost = l.by[d].cost.Add(a.Cost)
		}
	}
}

// overhead is what the calls cost beyond their answers.
func (l *ledger) overhead() cost.Cost {
	var c cost.Cost
	for _, d := range l.by {
		c = c.Add(d.cost)
	}
	return c
}

func (l *ledger) total() cost.Cost { return l.served.Add(l.overhead()) }

// String says what the answers cost and what each decision added: "the
// answers $0.0031; the incident added $0.0042: 1 re-ask $0.001, 1
// fallback $0.0032". A failure that got no answer (a 529, a 429) is not
// billed: those decisions are listed apart.
func (l *ledger) String() string { return l.say("the answers") }

// say is String, naming what served answers.
func (l *ledger) say(answers string) string {
	var paid, free []string
	for d, b := range l.by {
		if b.n == 0 {
			continue
		}
		name := decisionNames[d][1]
		if b.n == 1 {
			name = decisionNames[d][0]
		}
		if b.cost == (cost.Cost{}) {
			free = append(free, fmt.Sprintf("%d %s", b.n, name))
		} else {
			paid = append(paid, fmt.Sprintf("%d %s %s", b.n, name, b.cost))
		}
	}
	s := fmt.Sprintf("%s %s; the incident added %s", answers, l.served, l.overhead())
	if len(paid) > 0 {
		s += ": " + strings.Join(paid, ", ")
	}
	if len(free) > 0 {
		s += " (" + strings.Join(free, ", ") + ": not billed, no answer came)"
	}
	return s
}

// build is the chain both modes run: the quickstart's subject.
func build(eu1, eu2, oai llm.Provider) (*chain.Chain, error) {
	fast := retry.Policy{Base: 200 * time.Millisecond, Pad: 300 * time.Millisecond}
	b := chain.New("support-answer").Deadline(30 * time.Second)
	switch {
	case eu1 != nil:
		b.Primary(chain.Target{Name: "sonnet-eu-1", Provider: eu1, Model: sonnet, Retry: fast, Params: llm.Params{MaxTokens: 300}})
		if eu2 != nil {
			b.OrDeployment(chain.Target{Name: "sonnet-eu-2", Provider: eu2, Model: sonnet, Retry: fast, Params: llm.Params{MaxTokens: 300}})
		}
		b.OrSibling(chain.Target{Name: "haiku-eu", Provider: eu1, Model: haiku, Retry: fast, Params: llm.Params{MaxTokens: 300}})
		if oai != nil {
			b.OrProvider(chain.Target{Name: "gpt-eu", Provider: oai, Model: gpt, Retry: fast, Params: llm.Params{MaxTokens: 300}})
		}
	default:
		b.Primary(chain.Target{Name: "gpt", Provider: oai, Model: gpt, Retry: fast, Params: llm.Params{MaxTokens: 300}})
	}
	return b.OrDegrade(degrade.Static(llm.Response{Text: "We're busy right now; a person will answer you shortly."})).Build()
}

// real runs the chain against the real APIs with whichever keys are set.
func real(ctx context.Context) error {
	var eu1, oai llm.Provider
	if key := os.Getenv("ANTHROPIC_API_KEY"); key != "" {
		eu1 = mustAnthropic(anthropic.Config{APIKey: key})
	}
	if key := os.Getenv("OPENAI_API_KEY"); key != "" {
		oai = mustOpenAI(openai.Config{APIKey: key})
	}
	c, err := build(eu1, nil, oai)
	if err != nil {
		return err
	}
	fmt.Println("Calling the real APIs.")
	call(ctx, c, ask("In one sentence: why should retries use jitter?"))
	return nil
}

// call makes one call, prints its path and what it cost, and returns its
// result.
func call(ctx context.Context, c *chain.Chain, req llm.Request) *chain.Result {
	fmt.Printf("   Q: %s\n", req.Messages[len(req.Messages)-1].Content)
	start := time.Now()
	res, err := c.Call(ctx, req)
	for _, a := range res.Attempts {
		fmt.Printf("   - %s\n", a)
	}
	elapsed := time.Since(start).Round(10 * time.Millisecond)
	defer func() {
		var l ledger
		l.add(res)
		fmt.Printf("   $ %s in all: %s\n", res.Cost(), l.say("the answer"))
	}()
	if err != nil {
		var le *llm.Error
		if errors.As(err, &le) {
			// Detail is the provider's own words: fine on your terminal, but
			// they may quote the prompt, so err.Error() leaves them out.
			fmt.Printf("   => failed after %v: %s (kind %s, request-id %s)\n", elapsed, le.Detail, llm.KindOf(err), le.RequestID)
		} else {
			fmt.Printf("   => failed after %v: %v\n", elapsed, err)
		}
		return res
	}
	s := res.Served
	how := fmt.Sprintf("%s (%s, %s, model %s, request-id %s)", s.Target, s.Tier, s.Provider, s.Model, s.RequestID)
	if res.Degraded {
		how = fmt.Sprintf("%s (degraded)", s.Target)
	}
	answer := strings.TrimSpace(res.Text)
	for _, tc := range res.ToolCalls {
		answer += fmt.Sprintf("calls %s %s", tc.Name, tc.Arguments)
	}
	fmt.Printf("   => served by %s after %v\n   A: %s\n", how, elapsed, answer)
	return res
}

func mustAnthropic(cfg anthropic.Config) llm.Provider {
	p, err := anthropic.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	return p
}

func mustOpenAI(cfg openai.Config) llm.Provider {
	p, err := openai.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	return p
}

// Command quickstart replays a small incident through a backstop chain and
// prints each call's path: the targets tried, their statuses, the waits, and
// who served.
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
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/backstop-llm/backstop/chain"
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

	fmt.Println("\n1. A malformed request fails fast: sent once, never retried, never passed on.")
	eu1.Script(sonnet, fake.BadRequest("messages.0.content: text content blocks must be non-empty"))
	call(ctx, c, "Hello?")

	fmt.Println("\n2. The primary deployment is overloaded; the second deployment is rate limited; the sibling model answers.")
	eu1.Script(sonnet, fake.Overloaded())
	eu2.Script(sonnet, fake.RateLimited("1"), fake.RateLimited("45"))
	eu1.Script(haiku, fake.Answer("Your order left the warehouse this morning."))
	call(ctx, c, "Where is my order?")

	fmt.Println("\n3. Every model is down: the primary's breaker opens, the second deployment is still closed by its Retry-After, and the degradation answers.")
	eu1.Script(haiku, fake.ServerError(), fake.ServerError(), fake.ServerError())
	oai.Script(gpt, fake.Status(503))
	call(ctx, c, "Can I change my delivery address?")

	fmt.Println("\n4. The sibling has recovered. The chain remembers the rest: the primary (breaker open) and the second deployment (Retry-After) are skipped without a request.")
	eu1.Script(haiku, fake.Answer("Yes: reply with the new address and we will update it."))
	call(ctx, c, "Can I change my delivery address?")
	fmt.Printf("\nRequests received: sonnet on eu-1 %d, sonnet on eu-2 %d, haiku %d, gpt %d.\n",
		eu1.Requests(sonnet), eu2.Requests(sonnet), eu1.Requests(haiku), oai.Requests(gpt))
	return nil
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
	call(ctx, c, "In one sentence: why should retries use jitter?")
	return nil
}

// call makes one call and prints its path.
func call(ctx context.Context, c *chain.Chain, question string) {
	fmt.Printf("   Q: %s\n", question)
	start := time.Now()
	res, err := c.Call(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: question}}})
	for _, a := range res.Attempts {
		fmt.Printf("   - %s\n", a)
	}
	elapsed := time.Since(start).Round(10 * time.Millisecond)
	if err != nil {
		var le *llm.Error
		if errors.As(err, &le) {
			// Detail is the provider's own words: fine on your terminal, but
			// they may quote the prompt, so err.Error() leaves them out.
			fmt.Printf("   => failed after %v: %s (kind %s, request-id %s)\n", elapsed, le.Detail, llm.KindOf(err), le.RequestID)
		} else {
			fmt.Printf("   => failed after %v: %v\n", elapsed, err)
		}
		return
	}
	s := res.Served
	how := fmt.Sprintf("%s (%s, %s, model %s, request-id %s)", s.Target, s.Tier, s.Provider, s.Model, s.RequestID)
	if res.Degraded {
		how = fmt.Sprintf("%s (degraded)", s.Target)
	}
	fmt.Printf("   => served by %s after %v\n   A: %s\n", how, elapsed, strings.TrimSpace(res.Text))
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

package chain_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/retry"
)

// stub is an llm.Provider whose answers come from a function.
type stub struct {
	name string
	fn   func(ctx context.Context, req llm.Request) (*llm.Response, error)
}

func (s *stub) Name() string { return s.name }
func (s *stub) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if s.fn == nil {
		return &llm.Response{Text: "ok", Model: req.Model}, nil
	}
	return s.fn(ctx, req)
}

func TestBuildReportsEveryProblemNamingTheTarget(t *testing.T) {
	a, o := &stub{name: "anthropic"}, &stub{name: "openai"}
	_, err := chain.New("support").
		Deadline(-time.Second).
		Primary(chain.Target{Name: "sonnet", Provider: a, Model: "sonnet-5"}).
		OrDeployment(chain.Target{Name: "wrong-model", Provider: a, Model: "haiku-5"}).
		OrSibling(chain.Target{Name: "other-vendor", Provider: o, Model: "gpt"}).
		OrSibling(chain.Target{Name: "sonnet", Provider: a, Model: "haiku-5"}).
		OrProvider(chain.Target{Name: "same-vendor", Provider: a, Model: "opus"}).
		OrProvider(chain.Target{Name: "no-provider", Model: "gpt"}).
		OrProvider(chain.Target{Name: "no-model", Provider: o}).
		OrProvider(chain.Target{Name: "bad-durations", Provider: o, Model: "gpt", Timeout: -1, Retry: retry.Policy{MaxAttempts: -2}}).
		OrProvider(chain.Target{Provider: o, Model: "gpt"}).
		OrSibling(chain.Target{Name: "late-sibling", Provider: a, Model: "haiku-4"}).
		OrDegrade(degrade.Static(llm.Response{Text: "sorry"})).
		OrDegrade(degrade.Static(llm.Response{Text: "sorry again"})).
		OrDegrade(nil).
		Build()
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("want llm.ErrInvalidConfig, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{
		`Deadline is -1s`,
		`target "wrong-model": OrDeployment serves model "haiku-5" but the primary serves "sonnet-5"`,
		`target "other-vendor": OrSibling is on provider "openai" but the primary is on "anthropic"`,
		`target "sonnet": the name is used twice`,
		`target "same-vendor": OrProvider is on the primary's provider "anthropic"`,
		`target "no-provider": Provider is nil`,
		`target "no-model": Model is empty`,
		`target "bad-durations": Timeout is -1ns`,
		`target "bad-durations": Retry is invalid: retry: invalid policy: MaxAttempts is -2`,
		`target "#9": OrProvider target has no Name`,
		`target "late-sibling": OrSibling comes after OrProvider`,
		`target "static": the name is used twice; wrap one degradation in degrade.Named`,
		`OrDegrade #13 was given a nil Degradation`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("Build error lacks %q\nfull error:\n%s", want, msg)
		}
	}
	var ce *chain.ConfigError
	if !errors.As(err, &ce) || ce.Chain != "support" {
		t.Fatalf("errors.As ConfigError: %v", ce)
	}
}

func TestBuildRejectsEmptyAndMisorderedChains(t *testing.T) {
	a := &stub{name: "anthropic"}
	cases := map[string]struct {
		b    *chain.Builder
		want string
	}{
		"empty":         {chain.New("x"), "the chain is empty"},
		"no name":       {chain.New("").Primary(chain.Target{Name: "p", Provider: a, Model: "m"}), "the chain has no name"},
		"starts late":   {chain.New("x").OrSibling(chain.Target{Name: "s", Provider: a, Model: "m"}), "starts with OrSibling; start it with Primary"},
		"two primaries": {chain.New("x").Primary(chain.Target{Name: "p", Provider: a, Model: "m"}).Primary(chain.Target{Name: "q", Provider: a, Model: "m"}), "Primary must be the first target and come once"},
		"degrade first": {chain.New("x").OrDegrade(degrade.Static(llm.Response{})), "starts with OrDegrade"},
		"target after degrade": {chain.New("x").Primary(chain.Target{Name: "p", Provider: a, Model: "m"}).
			OrDegrade(degrade.Static(llm.Response{})).OrDeployment(chain.Target{Name: "d", Provider: a, Model: "m"}), "OrDeployment comes after OrDegrade"},
	}
	for name, tc := range cases {
		_, err := tc.b.Build()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want error containing %q, got %v", name, tc.want, err)
		}
	}
}

func TestBuildAcceptsAFullChain(t *testing.T) {
	a1, a2, o := &stub{name: "anthropic"}, &stub{name: "anthropic"}, &stub{name: "openai"}
	c, err := chain.New("support").
		Deadline(45 * time.Second).
		Primary(chain.Target{Name: "sonnet-eu-1", Provider: a1, Model: "sonnet"}).
		OrDeployment(chain.Target{Name: "sonnet-eu-2", Provider: a2, Model: "sonnet"}).
		OrSibling(chain.Target{Name: "haiku-eu", Provider: a1, Model: "haiku"}).
		OrProvider(chain.Target{Name: "gpt-eu", Provider: o, Model: "gpt"}).
		OrDegrade(degrade.Static(llm.Response{Text: "busy"})).
		OrDegrade(degrade.Named("apology", degrade.Static(llm.Response{Text: "sorry"}))).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if c.Name() != "support" {
		t.Fatalf("Name() = %q", c.Name())
	}
}

func TestAllowRegionsNamesEveryTargetOutside(t *testing.T) {
	a, o := &stub{name: "anthropic"}, &stub{name: "openai"}
	_, err := chain.New("support").AllowRegions("eu").
		Primary(chain.Target{Name: "sonnet-eu", Provider: a, Model: "sonnet", Region: "eu"}).
		OrDeployment(chain.Target{Name: "sonnet-us", Provider: a, Model: "sonnet", Region: "us"}).
		OrProvider(chain.Target{Name: "gpt-nowhere", Provider: o, Model: "gpt"}).
		OrDegrade(degrade.Static(llm.Response{Text: "busy"})).
		Build()
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("want llm.ErrInvalidConfig, got %v", err)
	}
	msg := err.Error()
	for _, want := range []string{`target "sonnet-us": Region "us" is outside the allowed regions ["eu"]`,
		`target "gpt-nowhere": Region is empty`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if strings.Contains(msg, "sonnet-eu") || strings.Contains(msg, "static") {
		t.Errorf("error names a target inside the regions or a degradation:\n%s", msg)
	}
	if _, err := chain.New("ok").AllowRegions("eu", "eu-west-1").
		Primary(chain.Target{Name: "p", Provider: a, Model: "m", Region: "eu-west-1"}).Build(); err != nil {
		t.Fatal(err)
	}
}

func TestBuildRejectsInvalidBreakerSettings(t *testing.T) {
	_, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: &stub{name: "a"}, Model: "m",
		Breaker: breaker.Config{FailureRatio: 2}}).Build()
	if !errors.Is(err, llm.ErrInvalidConfig) || !errors.Is(err, llm.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), `target "p": Breaker is invalid`) {
		t.Fatalf("got %v", err)
	}
}

// panicky is a provider whose Name panics, as a value-receiver method on a
// struct holding a nil client might.
type panicky struct{}

func (panicky) Name() string { panic("no client") }
func (panicky) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return nil, errors.New("unreachable")
}

// TestBuildRejectsWhatEveryCallWouldFailOn: configuration that passed Build
// and then failed (or panicked) at call time is a Build error naming the
// target: NaN and infinite parameters, an Extra JSON cannot encode, typed
// nils, a provider with no name or a panicking Name, and a bucket count
// that would exhaust memory.
func TestBuildRejectsWhatEveryCallWouldFailOn(t *testing.T) {
	var nilProvider *anthropic.Provider
	var nilBudget *budget.Ratio
	var nilStore *cache.Memory
	nan, inf := math.NaN(), math.Inf(1)
	o := &stub{name: "openai"}
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Build panicked: %v", p)
			}
		}()
		_, err = chain.New("c").
			Primary(chain.Target{Name: "typed-nil", Provider: nilProvider, Model: "m"}).
			OrProvider(chain.Target{Name: "nan", Provider: o, Model: "m", Params: llm.Params{Temperature: &nan}}).
			OrProvider(chain.Target{Name: "inf", Provider: &stub{name: "x"}, Model: "m", Params: llm.Params{TopP: &inf}}).
			OrProvider(chain.Target{Name: "extra", Provider: &stub{name: "y"}, Model: "m", Params: llm.Params{Extra: map[string]any{"f": func() {}}}}).
			OrProvider(chain.Target{Name: "max-tokens", Provider: &stub{name: "v"}, Model: "m", Params: llm.Params{MaxTokens: -1}}).
			OrProvider(chain.Target{Name: "nameless", Provider: &stub{}, Model: "m"}).
			OrProvider(chain.Target{Name: "panics", Provider: panicky{}, Model: "m"}).
			OrProvider(chain.Target{Name: "nil-budget", Provider: &stub{name: "z"}, Model: "m", Budget: nilBudget}).
			OrProvider(chain.Target{Name: "buckets", Provider: &stub{name: "w"}, Model: "m", Breaker: breaker.Config{BucketPeriod: time.Nanosecond}}).
			OrDegrade(degrade.LastGood(degrade.LastGoodConfig{Store: nilStore})).
			Build()
	}()
	if !errors.Is(err, llm.ErrInvalidConfig) {
		t.Fatalf("got %v; want llm.ErrInvalidConfig", err)
	}
	msg := err.Error()
	for _, want := range []string{
		`target "typed-nil": Provider is a nil *anthropic.Provider`,
		`target "nan": Params.Temperature is NaN`,
		`target "inf": Params.TopP is +Inf`,
		`target "extra": Params.Extra["f"] cannot be encoded`,
		`target "max-tokens": Params.MaxTokens is -1; it must not be negative`,
		`target "nameless": Provider.Name returned ""`,
		`target "panics": Provider.Name panicked (no client)`,
		`target "nil-budget": Budget is a nil *budget.Ratio`,
		`target "buckets": Breaker is invalid`,
		`target "last-good": degrade: invalid configuration: last-good: Store is nil`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

package backstop_test

// End-to-end tests of the public API: real chains, real adapters, the real
// wire formats, served by provider/fake in-process inside testing/synctest
// bubbles, so waits of seconds run in virtual time.

import (
	"context"
	"errors"
	"math"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"github.com/backstop-llm/backstop/provider/openai"
	"github.com/backstop-llm/backstop/retry"
)

const (
	sonnet = "claude-sonnet-5-5"
	haiku  = "claude-haiku-5"
	gpt    = "gpt-6.1"
)

var ask = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}}

func claude(t *testing.T, f *fake.Server) llm.Provider {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-test", BaseURL: f.URL(), HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func openAI(t *testing.T, f *fake.Server) llm.Provider {
	t.Helper()
	p, err := openai.New(openai.Config{APIKey: "sk-test", BaseURL: f.URL(), HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// incident is a four-tier chain over three fake deployments: two of
// Anthropic (eu1 serves the primary and the sibling) and one of OpenAI.
type incident struct {
	eu1, eu2, oai *fake.Server
	c             *chain.Chain
}

func newIncident(t *testing.T, b *chain.Builder, policy retry.Policy) *incident {
	t.Helper()
	in := &incident{eu1: fake.New(), eu2: fake.New(), oai: fake.New()}
	eu1, eu2, oai := claude(t, in.eu1), claude(t, in.eu2), openAI(t, in.oai)
	c, err := b.
		Primary(chain.Target{Name: "sonnet-eu-1", Provider: eu1, Model: sonnet, Retry: policy, ContextWindow: 200_000}).
		OrDeployment(chain.Target{Name: "sonnet-eu-2", Provider: eu2, Model: sonnet, Retry: policy, ContextWindow: 200_000}).
		OrSibling(chain.Target{Name: "haiku-eu", Provider: eu1, Model: haiku, Retry: policy, ContextWindow: 200_000}).
		OrProvider(chain.Target{Name: "gpt-eu", Provider: oai, Model: gpt, Retry: policy, ContextWindow: 1_000_000}).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	in.c = c
	return in
}

// requests returns the requests each target received, in chain order.
func (in *incident) requests() [4]int {
	return [4]int{in.eu1.Requests(sonnet), in.eu2.Requests(sonnet), in.eu1.Requests(haiku), in.oai.Requests(gpt)}
}

func TestBadRequestIsSentOnceAndNeverPassedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support"), retry.Policy{})
		in.eu1.Script(sonnet, fake.BadRequest("messages.0.content: field required"))
		res, err := in.c.Call(t.Context(), ask)
		if llm.KindOf(err) != llm.KindBadRequest || errors.Is(err, chain.ErrExhausted) {
			t.Fatalf("want a bad request that is not ErrExhausted, got %v", err)
		}
		var le *llm.Error
		if !errors.As(err, &le) || le.Status != 400 || le.RequestID == "" {
			t.Fatalf("the provider's error should be reachable: %#v", le)
		}
		if got := in.requests(); got != [4]int{1, 0, 0, 0} {
			t.Fatalf("requests per target = %v, want [1 0 0 0]", got)
		}
		if len(res.Attempts) != 1 || res.Attempts[0].Decision != chain.DecisionStop {
			t.Fatalf("attempts = %v", res.Attempts)
		}
	})
}

// TestCallersNaNIsABadRequestSentNowhere: the caller's own unencodable
// parameter is its request's fault: a bad request, no target is sent it.
func TestCallersNaNIsABadRequestSentNowhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support"), retry.Policy{})
		nan := math.NaN()
		req := ask
		req.Params.Temperature = &nan
		_, err := in.c.Call(t.Context(), req)
		if llm.KindOf(err) != llm.KindBadRequest {
			t.Errorf("got %v (kind %v); want a bad request", err, llm.KindOf(err))
		}
		if got := in.requests(); got != [4]int{} {
			t.Errorf("requests per target = %v; want none", got)
		}
	})
}

func TestOverloadStormMovesToTheNextTierAfterMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support"), retry.Policy{})
		in.eu1.Script(sonnet, fake.Overloaded())
		in.eu2.Script(sonnet, fake.Answer("from eu-2").Model(sonnet+"-20261101").RequestID("req_eu2"))
		res, err := in.c.Call(t.Context(), ask)
		if err != nil {
			t.Fatal(err)
		}
		if got := in.requests(); got != [4]int{3, 1, 0, 0} {
			t.Fatalf("requests per target = %v, want 3 on the primary (MaxAttempts) then 1", got)
		}
		want := chain.Served{Target: "sonnet-eu-2", Tier: chain.TierDeployment, Provider: "anthropic",
			Model: sonnet + "-20261101", RequestID: "req_eu2"}
		if res.Served != want || res.Text != "from eu-2" {
			t.Fatalf("served %+v %q", res.Served, res.Text)
		}
		for i, a := range res.Attempts[:3] {
			if a.Status != 529 || a.Kind != llm.KindOverloaded || a.N != i+1 || a.RequestID == "" {
				t.Errorf("attempt %d = %+v", i, a)
			}
		}
		if d := res.Attempts[2].Decision; d != chain.DecisionNext {
			t.Errorf("third attempt's decision %v, want next", d)
		}
	})
}

func TestRetryAfterIsAFloorPaddedAtMostPad(t *testing.T) {
	for _, pad := range []time.Duration{0, time.Second, 3 * time.Second} {
		synctest.Test(t, func(t *testing.T) {
			policy := retry.Policy{Pad: pad}
			if pad == 0 {
				policy.Pad = -1 // no pad
			}
			in := newIncident(t, chain.New("support"), policy)
			in.eu1.Script(sonnet, fake.RateLimited("4"), fake.Answer("ok"))
			res, err := in.c.Call(t.Context(), ask)
			if err != nil {
				t.Fatal(err)
			}
			at := in.eu1.Arrivals(sonnet)
			gap := at[1].Sub(at[0])
			if gap < 4*time.Second || gap > 4*time.Second+pad {
				t.Fatalf("pad %v: second attempt %v after the 429, want within [4s, 4s+pad]", pad, gap)
			}
			if res.Attempts[1].Wait != gap {
				t.Fatalf("recorded wait %v, measured %v", res.Attempts[1].Wait, gap)
			}
		})
	}
}

func TestHTTPDateRetryAfterInEachForm(t *testing.T) {
	forms := map[string]string{
		"IMF-fixdate": http.TimeFormat,
		"RFC 850":     "Monday, 02-Jan-06 15:04:05 GMT",
		"asctime":     time.ANSIC,
	}
	for name, layout := range forms {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				in := newIncident(t, chain.New("support"), retry.Policy{Pad: -1})
				when := time.Now().Add(7 * time.Second).UTC().Format(layout)
				in.eu1.Script(sonnet, fake.Status(429).RetryAfter(when), fake.Answer("ok"))
				if _, err := in.c.Call(t.Context(), ask); err != nil {
					t.Fatal(err)
				}
				at := in.eu1.Arrivals(sonnet)
				if gap := at[1].Sub(at[0]); gap != 7*time.Second {
					t.Fatalf("%s %q: waited %v, want 7s", name, when, gap)
				}
			})
		})
	}
}

func TestRetryAfterPastTheDeadlineMovesOnWithoutSleeping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support").Deadline(10*time.Second), retry.Policy{})
		in.eu1.Script(sonnet, fake.RateLimited("20")) // within MaxRetryAfter, past the deadline
		start := time.Now()
		res, err := in.c.Call(t.Context(), ask)
		if err != nil {
			t.Fatal(err)
		}
		if elapsed := time.Since(start); elapsed != 0 {
			t.Fatalf("the chain slept %v", elapsed)
		}
		if res.Served.Target != "sonnet-eu-2" || in.eu1.Requests(sonnet) != 1 {
			t.Fatalf("served by %q after %d primary requests", res.Served.Target, in.eu1.Requests(sonnet))
		}
		if a := res.Attempts[0]; a.Decision != chain.DecisionNext || a.Reason == "" {
			t.Fatalf("first attempt = %+v", a)
		}
	})
}

func TestRetryAfterBeyondMaxRetryAfterMovesOnAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support"), retry.Policy{})
		in.eu1.Script(sonnet, fake.RateLimited("60"))
		start := time.Now()
		res, err := in.c.Call(t.Context(), ask)
		if err != nil || time.Since(start) != 0 || res.Served.Target != "sonnet-eu-2" {
			t.Fatalf("err %v, slept %v, served %q", err, time.Since(start), res.Served.Target)
		}
	})
}

func TestContextLengthSkipsTargetsWithoutALargerWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support"), retry.Policy{})
		in.eu1.Script(sonnet, fake.ContextTooLong())
		res, err := in.c.Call(t.Context(), ask)
		if err != nil {
			t.Fatal(err)
		}
		if got := in.requests(); got != [4]int{1, 0, 0, 1} {
			t.Fatalf("requests per target = %v, want only the primary and the 1M-token gpt-eu", got)
		}
		if res.Served.Target != "gpt-eu" {
			t.Fatalf("served by %q", res.Served.Target)
		}
		for _, a := range res.Attempts[1:3] {
			if a.Decision != chain.DecisionSkip || !errors.Is(a.Err, chain.ErrContextWindow) {
				t.Fatalf("want a context-window skip, got %+v", a)
			}
		}
	})
}

func TestSpendCapAndInsufficientQuotaAreNeverRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support"), retry.Policy{})
		in.eu1.Script(sonnet, fake.SpendCap())
		in.eu2.Script(sonnet, fake.SpendCap())
		in.eu1.Script(haiku, fake.SpendCap())
		in.oai.Script(gpt, fake.SpendCap()) // insufficient_quota on OpenAI
		res, err := in.c.Call(t.Context(), ask)
		if !errors.Is(err, chain.ErrExhausted) {
			t.Fatalf("want ErrExhausted, got %v", err)
		}
		if got := in.requests(); got != [4]int{1, 1, 1, 1} {
			t.Fatalf("requests per target = %v, want one each", got)
		}
		for _, a := range res.Attempts {
			if a.Kind != llm.KindQuota || a.Status != 429 {
				t.Errorf("attempt %+v, want quota 429", a)
			}
		}
		var le *llm.Error
		if !errors.As(res.Attempts[3].Err, &le) || le.Code != "insufficient_quota" {
			t.Fatalf("OpenAI's cause = %#v", le)
		}
	})
}

func TestCanceledContextStopsTheWalkAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support"), retry.Policy{})
		in.eu1.Script(sonnet, fake.Hang())
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(3*time.Second, cancel)
		start := time.Now()
		res, err := in.c.Call(ctx, ask)
		if !errors.Is(err, context.Canceled) || errors.Is(err, chain.ErrExhausted) {
			t.Fatalf("want context.Canceled, got %v", err)
		}
		if time.Since(start) != 3*time.Second {
			t.Fatalf("returned %v after the start, want at the cancel (3s)", time.Since(start))
		}
		if got := in.requests(); got != [4]int{1, 0, 0, 0} {
			t.Fatalf("requests per target = %v", got)
		}
		if a := res.Attempts[0]; a.Kind != llm.KindCanceled || a.Decision != chain.DecisionStop {
			t.Fatalf("attempt = %+v", a)
		}
	})
}

func TestCanceledDuringAWaitStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support"), retry.Policy{})
		in.eu1.Script(sonnet, fake.RateLimited("20"))
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		_, err := in.c.Call(ctx, ask)
		if !errors.Is(err, context.Canceled) || in.eu1.Requests(sonnet) != 1 || in.eu2.Requests(sonnet) != 0 {
			t.Fatalf("err %v, requests %v", err, in.requests())
		}
	})
}

func TestEachAttemptIsExactlyOneHTTPRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support"), retry.Policy{MaxAttempts: 4})
		in.eu1.Script(sonnet, fake.Overloaded(), fake.ServerError(), fake.ConnReset(), fake.Status(503))
		in.eu2.Script(sonnet, fake.Status(502), fake.Answer("ok"))
		res, err := in.c.Call(t.Context(), ask)
		if err != nil {
			t.Fatal(err)
		}
		sent := 0
		for _, a := range res.Attempts {
			if a.Decision != chain.DecisionSkip {
				sent++
			}
		}
		if got := in.requests(); got != [4]int{4, 2, 0, 0} || sent != 6 {
			t.Fatalf("requests per target = %v for %d attempts", got, sent)
		}
		if k := res.Attempts[2].Kind; k != llm.KindConnection {
			t.Fatalf("reset classified %v", k)
		}
	})
}

func TestTimeoutPerAttemptIsRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := &incident{eu1: fake.New()}
		c, err := chain.New("support").Primary(chain.Target{Name: "p", Provider: claude(t, in.eu1), Model: sonnet,
			Timeout: 5 * time.Second, Retry: retry.Policy{Jitter: retry.NoJitter}}).Build()
		if err != nil {
			t.Fatal(err)
		}
		in.eu1.Script(sonnet, fake.Hang(), fake.Answer("ok"))
		res, err := c.Call(t.Context(), ask)
		if err != nil {
			t.Fatal(err)
		}
		a := res.Attempts[0]
		if a.Kind != llm.KindTimeout || a.Duration != 5*time.Second || res.Attempts[1].Wait != 500*time.Millisecond {
			t.Fatalf("attempts = %+v", res.Attempts)
		}
	})
}

func TestEveryTargetDownIsExhaustedWithEveryCause(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := newIncident(t, chain.New("support"), retry.Policy{MaxAttempts: 2})
		in.eu1.Script(sonnet, fake.Overloaded())
		in.eu2.Script(sonnet, fake.ServerError())
		in.eu1.Script(haiku, fake.Status(401))
		in.oai.Script(gpt, fake.Status(503))
		res, err := in.c.Call(t.Context(), ask)
		var ex *chain.ExhaustedError
		if !errors.Is(err, chain.ErrExhausted) || !errors.As(err, &ex) || len(ex.Causes) != 4 {
			t.Fatalf("err = %v", err)
		}
		wantKinds := []llm.Kind{llm.KindOverloaded, llm.KindServer, llm.KindAuth, llm.KindOverloaded}
		for i, cause := range ex.Causes {
			if k := llm.KindOf(cause); k != wantKinds[i] {
				t.Errorf("cause %d kind %v, want %v", i, k, wantKinds[i])
			}
		}
		// Each cause names its target and keeps the provider's error.
		var te *chain.TargetError
		var le *llm.Error
		if !errors.As(ex.Causes[2], &te) || te.Target != "haiku-eu" || !errors.As(ex.Causes[2], &le) || le.Status != 401 {
			t.Fatalf("third cause = %v", ex.Causes[2])
		}
		if got := in.requests(); got != [4]int{2, 2, 1, 2} || len(res.Attempts) != 7 {
			t.Fatalf("requests per target = %v, %d attempts", got, len(res.Attempts))
		}
		if res.Attempts[0].Decision != chain.DecisionRetry || res.Attempts[1].Decision != chain.DecisionNext {
			t.Fatalf("attempts = %v", res.Attempts)
		}
	})
}

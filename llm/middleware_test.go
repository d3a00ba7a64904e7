package llm_test

// Wrapped providers in a chain: a Middleware around the real Anthropic
// adapter (over the fake provider) or a provider of the test's own keeps
// what the provider has, and its hooks see every attempt.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/anthropic"
	"github.com/backstop-llm/backstop/provider/fake"
	"go.uber.org/goleak"
)

const sonnet = "claude-sonnet-5-5"

var ask = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Where is my order?"}}}

func claude(t testing.TB, f *fake.Server) llm.Provider {
	t.Helper()
	p, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-test", BaseURL: f.URL(), HTTPClient: f.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// attempts records what a Middleware's hooks saw, one entry an attempt:
// "complete" or "stream", and the Kind of its failure.
type attempts struct {
	mu   sync.Mutex
	seen []string
}

func (a *attempts) add(call string, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		call += " " + llm.KindOf(err).String()
	}
	a.seen = append(a.seen, call)
}

func (a *attempts) middleware() llm.Middleware {
	return llm.Middleware{
		Complete: func(next llm.CompleteFunc) llm.CompleteFunc {
			return func(ctx context.Context, req llm.Request) (*llm.Response, error) {
				r, err := next(ctx, req)
				a.add("complete", err)
				return r, err
			}
		},
		Stream: func(next llm.StreamFunc) llm.StreamFunc {
			return func(ctx context.Context, req llm.Request) (llm.Stream, error) {
				s, err := next(ctx, req)
				a.add("stream", err)
				return s, err
			}
		},
	}
}

func oneTarget(t *testing.T, p llm.Provider) *chain.Chain {
	t.Helper()
	c, err := chain.New("support").Primary(chain.Target{Name: "sonnet", Provider: p, Model: sonnet}).Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestWrappedProviderStreamsThroughAChain: a chain streams from a wrapped
// Anthropic adapter chunk by chunk, through the Stream hook. The same
// adapter hidden in a struct that embeds llm.Provider (what wrapping meant
// before Wrap) is asked for the whole answer and delivers it in one chunk.
func TestWrappedProviderStreamsThroughAChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name       string
			wrap       func(llm.Provider, *attempts) llm.Provider
			chunks     int
			seen       string
			streamBody bool
		}{
			{"llm.Wrap", func(p llm.Provider, a *attempts) llm.Provider { return llm.Wrap(p, a.middleware()) }, 4, "stream", true},
			{"embedded", func(p llm.Provider, _ *attempts) llm.Provider { return struct{ llm.Provider }{p} }, 1, "", false},
		} {
			f := fake.New()
			f.Script(sonnet, fake.Answer("Your order ships today.").Chunks("Your ", "order ", "ships ", "today."))
			a := &attempts{}
			s := oneTarget(t, tc.wrap(claude(t, f), a)).Stream(t.Context(), ask)
			var text []string
			for ch, err := range s.Chunks() {
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				text = append(text, ch.Text)
			}
			if strings.Join(text, "") != "Your order ships today." || len(text) != tc.chunks {
				t.Errorf("%s: chunks %q, want the answer in %d", tc.name, text, tc.chunks)
			}
			if got := strings.Join(a.seen, ","); got != tc.seen {
				t.Errorf("%s: hooks saw %q, want %q", tc.name, got, tc.seen)
			}
			if body := string(f.Calls(sonnet)[0].Body); strings.Contains(body, `"stream":true`) != tc.streamBody {
				t.Errorf("%s: request body %s; streamed: want %v", tc.name, body, tc.streamBody)
			}
		}
	})
	goleak.VerifyNone(t)
}

// TestMiddlewareSeesEveryAttempt: the Complete hook is called once per
// attempt, retries included, with the attempt's outcome; a hook that
// fails an attempt without calling next (injected chaos) is retried like
// the provider's own failure.
func TestMiddlewareSeesEveryAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		f.Script(sonnet, fake.Overloaded(), fake.Answer("Your order ships today."))
		a := &attempts{}
		chaos := llm.Middleware{Complete: func(next llm.CompleteFunc) llm.CompleteFunc {
			first := true
			return func(ctx context.Context, req llm.Request) (*llm.Response, error) {
				if first {
					first = false
					return nil, &llm.Error{Provider: "chaos", Status: 500, Kind: llm.KindServer, Message: "injected"}
				}
				return next(ctx, req)
			}
		}}
		// chaos is applied last, so it runs first: its injected failure
		// goes to the chain without reaching the recorder inside it.
		p := llm.Wrap(llm.Wrap(claude(t, f), a.middleware()), chaos)
		res, err := oneTarget(t, p).Call(t.Context(), ask)
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != "Your order ships today." || len(res.Attempts) != 3 {
			t.Fatalf("result %q after %d attempts %+v, want the answer at the third", res.Text, len(res.Attempts), res.Attempts)
		}
		if res.Attempts[0].Kind != llm.KindServer || res.Attempts[1].Kind != llm.KindOverloaded {
			t.Errorf("attempts %+v, want the injected server error, then the fake's overload", res.Attempts)
		}
		if got := strings.Join(a.seen, ","); got != "complete overloaded,complete" {
			t.Errorf("the recorder saw %q, want the two attempts that reached it", got)
		}
		if n := f.Requests(sonnet); n != 2 {
			t.Errorf("the fake received %d requests, want 2 (the injected failure sent none)", n)
		}
	})
}

// textOnly is a provider that carries text only (it declares no
// capabilities) and is served in eu-west-1; it counts the calls it is
// sent.
type textOnly struct {
	mu    sync.Mutex
	calls int
}

func (p *textOnly) Name() string { return "textonly" }

func (p *textOnly) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	return &llm.Response{Text: "ok", Model: req.Model}, nil
}

func (p *textOnly) Capabilities() llm.Capabilities { return 0 }

func (p *textOnly) Deployment() llm.Deployment {
	return llm.Deployment{Platform: "selfhosted", Region: "eu-west-1"}
}

// TestWrappedProviderKeepsItsCapabilities: a chain refuses a request with
// an image to a wrapped text-only provider, sending it nothing, where it
// sends the image to the same provider hidden in a struct that embeds
// llm.Provider; and it passes over a wrapped Anthropic adapter for a
// document type that Anthropic does not take.
func TestWrappedProviderKeepsItsCapabilities(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		image := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is this?",
			Parts: []llm.Part{llm.ImagePart("image/png", []byte("\x89PNG"))}}}}
		p := &textOnly{}
		a := &attempts{}
		_, err := oneTarget(t, llm.Wrap(p, a.middleware())).Call(t.Context(), image)
		if !errors.Is(err, chain.ErrCapability) || p.calls != 0 || len(a.seen) != 0 {
			t.Fatalf("wrapped: got %v, %d calls, hooks saw %q; want ErrCapability and nothing sent", err, p.calls, a.seen)
		}
		if _, err := oneTarget(t, struct{ llm.Provider }{p}).Call(t.Context(), image); err != nil || p.calls != 1 {
			t.Fatalf("embedded: got %v after %d calls; want the image sent to the provider that no longer declares what it lacks", err, p.calls)
		}

		f := fake.New()
		zipped := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is in this archive?",
			Parts: []llm.Part{llm.DocumentPart("application/zip", []byte("PK\x03\x04"))}}}}
		files := &takesAll{}
		c, err := chain.New("archive").
			Primary(chain.Target{Name: "sonnet", Provider: llm.Wrap(claude(t, f), a.middleware()), Model: sonnet}).
			OrProvider(chain.Target{Name: "files", Provider: files, Model: "files-1"}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), zipped)
		if err != nil || res.Served.Target != "files" || !errors.Is(res.Attempts[0].Err, chain.ErrCapability) {
			t.Fatalf("result %+v, %v; want sonnet passed over (ErrCapability) and files serving", res, err)
		}
		if n := f.Requests(sonnet); n != 0 || len(a.seen) != 0 {
			t.Errorf("Anthropic was sent %d requests, hooks saw %q; want none", n, a.seen)
		}
	})
}

// takesAll is a provider that declares no media types: it is sent every
// media type.
type takesAll struct{}

func (*takesAll) Name() string { return "files" }

func (*takesAll) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: "ok", Model: req.Model}, nil
}

// TestWrappedProviderKeepsItsDeployment: a chain that allows only
// eu-west-1 builds over a wrapped provider deployed there, with no Region
// on the target, as it does over the provider itself; hidden in a struct
// that embeds llm.Provider, the provider no longer says where it is.
func TestWrappedProviderKeepsItsDeployment(t *testing.T) {
	build := func(p llm.Provider) error {
		_, err := chain.New("eu").AllowRegions("eu-west-1").
			Primary(chain.Target{Name: "local", Provider: p, Model: "local-1"}).
			Build()
		return err
	}
	if err := build(llm.Wrap(&textOnly{}, llm.Middleware{})); err != nil {
		t.Errorf("wrapped: %v", err)
	}
	if err := build(struct{ llm.Provider }{&textOnly{}}); err == nil || !strings.Contains(err.Error(), "does not say where it is deployed") {
		t.Errorf("embedded: %v; want Build to say the provider's deployment is unknown", err)
	}
}

// Wrap a provider to count its attempts (or add headers, or inject
// faults) without losing what it declares: the wrapped Anthropic adapter
// still streams and still declares the media types Anthropic takes, and a
// chain calls the hook once for each attempt.
func ExampleWrap() {
	s := fake.New()
	s.Script("claude-sonnet-5-5", fake.Answer("Hello!"), fake.Answer("Hello again!"))
	claude, err := anthropic.New(anthropic.Config{APIKey: "sk-ant-test", BaseURL: s.URL(), HTTPClient: s.Client()})
	if err != nil {
		panic(err)
	}

	var calls int // one chain call at a time here; guard it in a server
	counted := llm.Wrap(claude, llm.Middleware{
		Complete: func(next llm.CompleteFunc) llm.CompleteFunc {
			return func(ctx context.Context, req llm.Request) (*llm.Response, error) {
				calls++
				return next(ctx, req)
			}
		},
	})
	_, streams := counted.(llm.StreamProvider)
	fmt.Println("streams:", streams)
	fmt.Println("documents:", counted.(llm.MediaProvider).MediaTypes().Documents)

	c, err := chain.New("hello").
		Primary(chain.Target{Name: "sonnet", Provider: counted, Model: "claude-sonnet-5-5"}).
		Build()
	if err != nil {
		panic(err)
	}
	for range 2 {
		res, err := c.Call(context.Background(), llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "Hi"}}})
		if err != nil {
			panic(err)
		}
		fmt.Println(res.Text)
	}
	fmt.Println("attempts counted:", calls)

	// Output:
	// streams: true
	// documents: [application/pdf text/*]
	// Hello!
	// Hello again!
	// attempts counted: 2
}

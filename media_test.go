package backstop_test

// Media types across a chain: a target whose provider does not take a
// request's media type is passed over, recorded with its reason, and the
// chain goes on; when no target takes it, the call is a bad request sent
// nowhere.

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/provider/fake"
)

// zipped is a request carrying a ZIP archive as a document: Anthropic
// takes only PDF and plain-text documents, OpenAI's Chat Completions only
// PDFs (and the adapter sends text as text).
var zipped = llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "What is in this archive?",
	Parts: []llm.Part{llm.DocumentPart("application/zip", []byte("PK\x03\x04"))}}}}

// takesAll is a provider that declares no media types, as a third-party
// provider written before they could be declared: it is sent every media
// type, and answers "ok".
type takesAll struct {
	mu   sync.Mutex
	reqs []llm.Request
}

func (p *takesAll) Name() string { return "files" }

func (p *takesAll) Complete(_ context.Context, req llm.Request) (*llm.Response, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reqs = append(p.reqs, req)
	return &llm.Response{Text: "ok", Model: req.Model}, nil
}

// TestMediaTypeOneTargetRefusesIsPassedOver: Anthropic does not take an
// application/zip document. The chain passes it over, its record naming
// the media type, and the next target, which takes it, serves; Anthropic
// is sent nothing. (It was a bad request from the Anthropic adapter that
// ended the whole chain.)
func TestMediaTypeOneTargetRefusesIsPassedOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fake.New()
		files := &takesAll{}
		c, err := chain.New("archive").
			Primary(chain.Target{Name: "sonnet", Provider: claude(t, f), Model: sonnet}).
			OrProvider(chain.Target{Name: "files", Provider: files, Model: "files-1"}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Call(t.Context(), zipped)
		if err != nil {
			t.Fatalf("call failed: %v", err)
		}
		if res.Served.Target != "files" {
			t.Fatalf("served by %q, want files", res.Served.Target)
		}
		if n := f.Requests(sonnet); n != 0 {
			t.Errorf("Anthropic was sent %d requests, want none", n)
		}
		if len(res.Attempts) != 2 {
			t.Fatalf("attempts %+v, want a skip then the answer", res.Attempts)
		}
		skip := res.Attempts[0]
		if skip.Target != "sonnet" || skip.Decision != chain.DecisionSkip || !errors.Is(skip.Err, chain.ErrCapability) ||
			!strings.Contains(skip.Reason, `"application/zip"`) {
			t.Fatalf("skip record %+v; want sonnet skipped with ErrCapability, the reason naming application/zip", skip)
		}
		if len(files.reqs) != 1 || files.reqs[0].Messages[0].Parts[0].Media.MediaType != "application/zip" {
			t.Fatalf("the document did not reach the second target: %+v", files.reqs)
		}
	})
}

// TestMediaTypeNoTargetTakesIsABadRequest: when no target of the chain
// takes a media type the request carries (neither Anthropic nor OpenAI's
// Chat Completions takes application/zip), the call is a bad request sent
// nowhere, whose message names the media type and what the targets take.
func TestMediaTypeNoTargetTakesIsABadRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ant, oai := fake.New(), fake.New()
		c, err := chain.New("archive").
			Primary(chain.Target{Name: "sonnet", Provider: claude(t, ant), Model: sonnet}).
			OrProvider(chain.Target{Name: "gpt", Provider: openAI(t, oai), Model: gpt}).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Call(t.Context(), zipped)
		if llm.KindOf(err) != llm.KindBadRequest || errors.Is(err, chain.ErrExhausted) {
			t.Fatalf("got %v (kind %v); want a bad request, not ErrExhausted", err, llm.KindOf(err))
		}
		for _, want := range []string{`no target takes document media type "application/zip"`, "application/pdf"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if a, o := ant.Requests(sonnet), oai.Requests(gpt); a+o != 0 {
			t.Errorf("requests sent: Anthropic %d, OpenAI %d; want none", a, o)
		}
	})
}

package chain_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
)

// typed is a recorder that declares the media types it takes.
type typed struct {
	*recorder
	media llm.MediaTypes
}

func (p typed) MediaTypes() llm.MediaTypes { return p.media }

// anthropicLike takes what Anthropic's Messages API takes.
var anthropicLike = llm.MediaTypes{
	Images:    []string{"image/jpeg", "image/png", "image/gif", "image/webp"},
	Documents: []string{"application/pdf", "text/*"},
}

// carrying is a request of one user message carrying part.
func carrying(part llm.Part) llm.Request {
	return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is this?", Parts: []llm.Part{part}}}}
}

// TestMediaTypeATargetDoesNotTakeIsPassedOver: an Anthropic-like target
// that does not take the request's media type is passed over without a
// request, recorded with ErrCapability and a reason naming the type, and
// the next target, which declares no limit (an OpenAI-like target that
// sends any document), serves. A type it takes goes to it.
func TestMediaTypeATargetDoesNotTakeIsPassedOver(t *testing.T) {
	for _, tc := range []struct {
		name, reason string
		part         llm.Part
	}{
		{"document", `cannot carry document media type "application/zip"`, llm.DocumentPart("application/zip", []byte("PK\x03\x04"))},
		{"image", `cannot carry image media type "image/bmp"`, llm.ImagePart("image/bmp", []byte("BM"))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := typed{&recorder{name: "anthropic"}, anthropicLike}
			second := &recorder{name: "openai"}
			c, err := chain.New("files").
				Primary(chain.Target{Name: "claude", Provider: first, Model: "m"}).
				OrProvider(chain.Target{Name: "gpt", Provider: second, Model: "g"}).
				Build()
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Call(context.Background(), carrying(tc.part))
			if err != nil || res.Served.Target != "gpt" {
				t.Fatalf("%v, served %+v; want gpt to serve", err, res.Served)
			}
			if len(first.reqs) != 0 {
				t.Fatalf("the first target was sent %d requests", len(first.reqs))
			}
			skip := res.Attempts[0]
			if skip.Target != "claude" || skip.Decision != chain.DecisionSkip || !errors.Is(skip.Err, chain.ErrCapability) || skip.Reason != tc.reason {
				t.Fatalf("skip record %+v; want reason %q", skip, tc.reason)
			}
			// A media type the first target takes goes to it; so does an
			// image by URL, whose type is not known before it is fetched.
			for _, part := range []llm.Part{llm.DocumentPart("text/markdown; charset=utf-8", []byte("# notes")), llm.ImagePart("image/png", []byte("\x89PNG")), llm.ImageURLPart("https://x.test/a.bmp")} {
				res, err = c.Call(context.Background(), carrying(part))
				if err != nil || res.Served.Target != "claude" || len(res.Attempts) != 1 {
					t.Fatalf("%+v: %v, served %+v, attempts %+v; want claude at once", part.Media, err, res.Served, res.Attempts)
				}
			}
		})
	}
}

// TestMediaTypeNoTargetTakesIsABadRequest: when no model target takes a
// media type the request carries, the call fails before anything is sent,
// as a bad request (not ErrExhausted) whose message names the media type,
// where it is, and what the targets take.
func TestMediaTypeNoTargetTakesIsABadRequest(t *testing.T) {
	first := typed{&recorder{name: "anthropic"}, anthropicLike}
	second := typed{&recorder{name: "openai"}, llm.MediaTypes{Documents: []string{"application/pdf", "text/*", "application/vnd.ms-excel"}}}
	c, err := chain.New("files").
		Primary(chain.Target{Name: "claude", Provider: first, Model: "m"}).
		OrProvider(chain.Target{Name: "gpt", Provider: second, Model: "g"}).
		OrDegrade(degrade.Static(llm.Response{Text: "cached"})).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Call(context.Background(), carrying(llm.DocumentPart("application/zip", []byte("PK\x03\x04"))))
	if llm.KindOf(err) != llm.KindBadRequest || errors.Is(err, chain.ErrExhausted) || chain.VerdictOf(err) != retry.VerdictBadRequest {
		t.Fatalf("got %v (kind %v); want a bad request, not ErrExhausted", err, llm.KindOf(err))
	}
	want := `message 0 (user), part 0: no target takes document media type "application/zip" (they take application/pdf, text/*, application/vnd.ms-excel)`
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q\nwant it to say %q", err, want)
	}
	if len(first.reqs)+len(second.reqs) != 0 || (res != nil && res.Degraded) {
		t.Fatalf("sent %d and %d requests, result %+v; want nothing sent, nothing degraded", len(first.reqs), len(second.reqs), res)
	}
	// The second declares no image types: it takes every image.
	res, err = c.Call(context.Background(), carrying(llm.ImagePart("image/bmp", []byte("BM"))))
	if err != nil || res.Served.Target != "gpt" {
		t.Fatalf("image: %v, served %+v; want gpt", err, res.Served)
	}
}

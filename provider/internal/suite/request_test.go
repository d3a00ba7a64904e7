package suite

// What each adapter sends, checked alike against the request shape its
// wire format documents (the adapters table): the method, path and
// headers, every field of a request and of Params (Extra overriding), no
// field left unset, and a Stream's body as Complete's plus its own fields.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
)

// shapeRequest sets every field of a request, and a's Extra.
func shapeRequest(a adapter) llm.Request {
	return llm.Request{
		Model:  "m",
		System: "Be <brief> & kind.",
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: "Hi"},
			{Role: llm.RoleAssistant, Content: "Hello"},
			{Role: llm.RoleUser, Content: "Again"},
		},
		Params: llm.Params{
			MaxTokens:   300,
			Temperature: llm.Float(0),
			TopP:        llm.Float(0.9),
			Stop:        []string{"END"},
			Extra:       a.extra,
		},
	}
}

// checkSent fails t unless got went by POST to a's path, with a's headers.
func checkSent(t *testing.T, a adapter, got Request) {
	t.Helper()
	if got.Method != http.MethodPost || got.Path != a.path {
		t.Errorf("request %s %s; want POST %s", got.Method, got.Path, a.path)
	}
	for k, want := range a.sent {
		if v := got.Header.Get(k); v != want {
			t.Errorf("header %s = %q; want %q", k, v, want)
		}
	}
}

func TestRequestShape(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, Respond(200, a.ok("fine")))
		p := a.with(t, config{key: a.key, base: s.URL + "/", header: a.header})
		if _, err := p.Complete(context.Background(), shapeRequest(a)); err != nil {
			t.Fatal(err)
		}
		got := s.Last()
		checkSent(t, a, got)
		if strings.Contains(string(got.Body), `\u003c`) {
			t.Errorf("body escapes HTML: %s", got.Body)
		}
		var body map[string]any
		if err := json.Unmarshal(got.Body, &body); err != nil {
			t.Fatalf("body is not JSON: %v: %s", err, got.Body)
		}
		if g, w := fmt.Sprint(body), fmt.Sprint(a.shape); g != w {
			t.Errorf("body\n got %s\nwant %s", g, w)
		}
	})
}

// TestRequestDefaults: what a request leaves unset is not sent (but for
// what the API requires).
func TestRequestDefaults(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, Respond(200, a.ok("fine")))
		if _, err := a.new(t, s.URL, nil).Complete(context.Background(), request); err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(s.Last().Body, &got); err != nil {
			t.Fatal(err)
		}
		if g, w := fmt.Sprint(got), fmt.Sprint(a.plain); g != w {
			t.Errorf("body\n got %s\nwant %s", g, w)
		}
	})
}

// TestStreamRequest: a Stream's body is Complete's plus the stream's own
// fields, sent with the same headers and Accept: text/event-stream.
func TestStreamRequest(t *testing.T) {
	forEach(t, func(t *testing.T, a adapter) {
		s := NewServer(t, StreamOrComplete(a.stream("Hello"), a.ok("Hello")))
		p := a.with(t, config{key: a.key, base: s.URL, header: a.header})
		complete, stream := Bodies(t, p, s, shapeRequest(a))
		got := s.Last()
		for k, want := range a.streamFields {
			if !reflect.DeepEqual(stream[k], want) {
				t.Errorf("%q = %v; want %v", k, stream[k], want)
			}
			delete(stream, k)
		}
		if !reflect.DeepEqual(stream, complete) || fmt.Sprint(complete) != fmt.Sprint(a.shape) {
			t.Errorf("stream body %v\nwant Complete's %v", stream, complete)
		}
		checkSent(t, a, got)
		if got.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("Accept = %q", got.Header.Get("Accept"))
		}
	})
}

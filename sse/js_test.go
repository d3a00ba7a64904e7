package sse_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/sse"
)

// page is what the docs' snippet showed, as testdata/eventsource.js
// reports it.
type page struct {
	Answer     string   `json:"answer"`
	Shown      []string `json:"shown"` // the answer element's text after each change
	Status     string   `json:"status"`
	Statuses   []string `json:"statuses"`
	ClosedOn   *string  `json:"closedOn"` // the event whose listener closed the source
	ReadyState int      `json:"readyState"`
	Reconnects int      `json:"reconnects"`
	Failure    string   `json:"failure"`
}

// snippet is the ```js block of docs/concepts.md's "Streaming to a
// browser", written to a file.
func snippet(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "concepts.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(doc), "\n### Streaming to a browser\n")
	if !ok {
		t.Fatal(`docs/concepts.md has no "### Streaming to a browser" section`)
	}
	if i := strings.Index(sec, "\n## "); i >= 0 {
		sec = sec[:i]
	}
	_, code, ok := strings.Cut(sec, "\n```js\n")
	if !ok {
		t.Fatal("the section has no ```js block")
	}
	code, _, ok = strings.Cut(code, "\n```\n")
	if !ok || !strings.Contains(code, "function streamAnswer(url, answer, status)") {
		t.Fatalf("the section's ```js block does not define streamAnswer(url, answer, status):\n%s", code)
	}
	path := filepath.Join(t.TempDir(), "snippet.js")
	if err := os.WriteFile(path, []byte(code+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// node finds Node.js: under CI=true its absence fails the test.
func node(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"node", "nodejs"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "Node.js (node) is not installed: it runs the docs' browser snippet (apt-get install -y nodejs)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: the test needs it)", msg)
	}
	t.Skip(msg)
	return ""
}

// render runs the docs' snippet under Node.js against url.
func render(t *testing.T, url string) page {
	t.Helper()
	bin, code := node(t), snippet(t)
	// A minute bounds a hung run: a guard, not a measure.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, filepath.Join("testdata", "eventsource.js"), code, url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.String())
	}
	var p page
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	if p.Failure != "" {
		t.Fatalf("the page's EventSource failed: %s", p.Failure)
	}
	return p
}

func closedOn(p page) string {
	if p.ClosedOn == nil {
		return "(not closed by a listener)"
	}
	return *p.ClosedOn
}

// The docs' snippet, on a chain that restarts its answer on the fallback:
// the page shows only the fallback's answer in the end, having cleared
// the primary's, and closes the source on "done" (a browser would
// otherwise reconnect and ask again).
func TestSnippetRendersRestart(t *testing.T) {
	overloaded := &llm.Error{Provider: "a", Status: 200, Kind: llm.KindOverloaded}
	a := &sprov{name: "a", steps: append(texts("One ", "two "), step{err: overloaded})}
	b := &sprov{name: "b", steps: texts("Fresh ", "answer.")}
	c := build(t, chain.New("c").RestartStreams(true).
		Primary(chain.Target{Name: "primary", Provider: a, Model: "m"}).
		OrProvider(chain.Target{Name: "fallback", Provider: b, Model: "m"}))
	srv, ended := serve(t, c, question)
	p := render(t, srv.URL)
	if e := <-ended; e[0] != nil || e[1] != nil {
		t.Fatalf("Write %v, Result %v", e[0], e[1])
	}
	wantShown := []string{"One ", "One two ", "", "Fresh ", "Fresh answer."}
	if p.Answer != "Fresh answer." || !reflect.DeepEqual(p.Shown, wantShown) {
		t.Errorf("the page shows %q (successively %q), want %q (successively %q)", p.Answer, p.Shown, "Fresh answer.", wantShown)
	}
	if closedOn(p) != "done" || p.Reconnects != 0 || p.Status != "" || !reflect.DeepEqual(p.Statuses, []string{"Retrying…", ""}) {
		t.Errorf("closed on %s, %d reconnects, statuses %q; want closed on done, none, [Retrying… \"\"]", closedOn(p), p.Reconnects, p.Statuses)
	}
}

// The docs' snippet shows tool activity, then the server's error message,
// and closes the source on "error".
func TestSnippetRendersToolsAndError(t *testing.T) {
	fail := &llm.Error{Provider: "a", Status: 529, Kind: llm.KindOverloaded, Message: "Overloaded"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse.Write(w, r, seq(fail,
			sse.Event{Name: sse.EventText, Data: sse.TextData{Text: "Checking. "}},
			sse.Event{Name: sse.EventToolStarted, Data: sse.ToolData{ID: "c1", Name: "refund"}},
			sse.Event{Name: sse.EventToolFinished, Data: sse.ToolData{ID: "c1", Name: "refund", Error: true}},
			sse.Event{Name: sse.EventToolStarted, Data: sse.ToolData{ID: "c2", Name: "lookup"}},
			sse.Event{Name: sse.EventToolFinished, Data: sse.ToolData{ID: "c2", Name: "lookup"}},
		))
	}))
	defer srv.Close()
	p := render(t, srv.URL)
	want := []string{"Running refund…", "refund failed", "Running lookup…", "lookup done", "The answer failed; try again shortly."}
	if !reflect.DeepEqual(p.Statuses, want) || p.Answer != "Checking. " {
		t.Errorf("statuses %q, answer %q; want %q, %q", p.Statuses, p.Answer, want, "Checking. ")
	}
	if closedOn(p) != "error" || p.Reconnects != 0 {
		t.Errorf("closed on %s, %d reconnects; want closed on error, none", closedOn(p), p.Reconnects)
	}
}

// A stream that ends without "done" or "error" (the server went away):
// the page says the connection was lost and closes the source, so the
// browser does not reconnect and ask again.
func TestSnippetRendersALostConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte("event: text\ndata: {\"text\":\"Half\"}\n\n"))
	}))
	defer srv.Close()
	p := render(t, srv.URL)
	if p.Answer != "Half" || p.Status != "The connection was lost." || closedOn(p) != "error" || p.Reconnects != 0 {
		t.Errorf("answer %q, status %q, closed on %s, %d reconnects; want Half, the connection was lost, error, none",
			p.Answer, p.Status, closedOn(p), p.Reconnects)
	}
}

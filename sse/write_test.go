package sse_test

import (
	"context"
	"encoding/json"
	"errors"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/sse"
)

// seq yields evs in order, then err if not nil.
func seq(err error, evs ...sse.Event) iter.Seq2[sse.Event, error] {
	return func(yield func(sse.Event, error) bool) {
		for _, ev := range evs {
			if !yield(ev, nil) {
				return
			}
		}
		if err != nil {
			yield(sse.Event{}, err)
		}
	}
}

// The wire format: an event line, one data line (encoding/json escapes a
// line break in a string and compacts a Marshaler's output, which may
// have CR, LF or CRLF), a blank line; no event line for an unnamed event;
// null for nil data.
func TestFrames(t *testing.T) {
	rec := httptest.NewRecorder()
	err := sse.Write(rec, httptest.NewRequest("GET", "/", nil), seq(nil,
		sse.Event{Name: sse.EventText, Data: sse.TextData{Text: "a\nb"}},
		sse.Event{Name: "raw", Data: json.RawMessage("{\n\"a\": 1,\r\n\"b\": 2\r}")},
		sse.Event{Data: nil},
		sse.Event{Name: sse.EventRestart, Data: struct{}{}},
	))
	if err != nil {
		t.Fatal(err)
	}
	want := "event: text\ndata: {\"text\":\"a\\nb\"}\n\n" +
		"event: raw\ndata: {\"a\":1,\"b\":2}\n\n" +
		"data: null\n\n" +
		"event: restart\ndata: {}\n\n"
	if g := rec.Body.String(); g != want {
		t.Fatalf("body\n%q\nwant\n%q", g, want)
	}
	// Compacted JSON, parsed as a browser would, is the data.
	evs := newReader(strings.NewReader(want)).all(t)
	var v map[string]int
	if err := json.Unmarshal([]byte(evs[1].Data), &v); err != nil || v["a"] != 1 || v["b"] != 2 {
		t.Fatalf("multi-line data read back as %q: %v %v", evs[1].Data, v, err)
	}
}

// An event that cannot be written (a line break in its name, data
// encoding/json refuses) ends the stream with an "error" event and the
// encoding error, and stops the iterator.
func TestBadEventEndsTheStream(t *testing.T) {
	for name, bad := range map[string]sse.Event{
		"name": {Name: "a\nb"},
		"data": {Name: "x", Data: func() {}},
	} {
		t.Run(name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			after := false
			events := func(yield func(sse.Event, error) bool) {
				if yield(bad, nil) {
					after = true
					yield(sse.Event{Name: "late"}, nil)
				}
			}
			err := sse.Write(rec, httptest.NewRequest("GET", "/", nil), events)
			if err == nil || !strings.HasPrefix(err.Error(), "sse: ") {
				t.Fatalf("Write = %v, want the encoding error", err)
			}
			evs := newReader(rec.Body).all(t)
			if len(evs) != 1 || evs[0].Name != "error" || after {
				t.Fatalf("events %v (iterator went on: %v), want one error event and a stopped iterator", evs, after)
			}
		})
	}
}

// Over a real connection: the headers, then text, restart, tool and error
// events in the order the iterator yields them. The error event carries
// the verdict, its status and a message of Write's own, not the error's
// text (which quotes the provider, and through it the prompt).
func TestEventsInOrderOverHTTP(t *testing.T) {
	fail := &llm.Error{Provider: "p", Status: 529, Kind: llm.KindOverloaded, Message: "overloaded while reading: my secret question"}
	var werr error
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		werr = sse.Write(w, r, seq(fail,
			sse.Event{Name: sse.EventText, Data: sse.TextData{Text: "Let me "}},
			sse.Event{Name: sse.EventRestart, Data: struct{}{}},
			sse.Event{Name: sse.EventToolStarted, Data: sse.ToolData{ID: "c1", Name: "refund"}},
			sse.Event{Name: sse.EventToolFinished, Data: sse.ToolData{ID: "c1", Name: "refund", Error: true}},
			sse.Event{Name: sse.EventText, Data: sse.TextData{Text: "Done."}},
		))
	}))
	defer srv.Close()
	resp := open(t, t.Context(), srv.URL)
	evs := newReader(resp.Body).all(t)
	want := []got{
		{"text", `{"text":"Let me "}`},
		{"restart", `{}`},
		{"tool_started", `{"id":"c1","name":"refund"}`},
		{"tool_finished", `{"id":"c1","name":"refund","error":true}`},
		{"text", `{"text":"Done."}`},
		{"error", `{"message":"The answer failed; try again shortly.","verdict":"retry_later","status":503}`},
	}
	if len(evs) != len(want) {
		t.Fatalf("events %v, want %v", evs, want)
	}
	for i := range want {
		if evs[i] != want[i] {
			t.Errorf("event %d: %v, want %v", i, evs[i], want[i])
		}
	}
	srv.Close() // waits for the handler
	if !errors.Is(werr, fail) {
		t.Errorf("Write = %v, want the iterator's error", werr)
	}
}

// Each event is flushed as it is written: the client reads the first
// while the iterator is still blocked making the second.
func TestEachEventIsFlushed(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse.Write(w, r, func(yield func(sse.Event, error) bool) {
			if !yield(sse.Event{Name: sse.EventText, Data: sse.TextData{Text: "first"}}, nil) {
				return
			}
			<-release // blocked until the client has read "first"
			yield(sse.Event{Name: sse.EventText, Data: sse.TextData{Text: "second"}}, nil)
		})
	}))
	defer srv.Close()
	resp := open(t, t.Context(), srv.URL)
	rd := newReader(resp.Body)
	ev, err := rd.next()
	if err != nil || ev.Data != `{"text":"first"}` {
		t.Fatalf("first event %v, %v", ev, err)
	}
	close(release)
	if rest := rd.all(t); len(rest) != 1 || rest[0].Data != `{"text":"second"}` {
		t.Fatalf("after the release: %v", rest)
	}
}

// A client that leaves ends the call: Write stops reading, the iterator's
// yield returns false, and Write returns the request context's error
// once the iterator has returned (goleak checks that nothing is left).
func TestDisconnectStopsTheIterator(t *testing.T) {
	type end struct {
		yieldFalse bool
		ctxErr     error
		writeErr   error
	}
	ended := make(chan end, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e end
		e.writeErr = sse.Write(w, r, func(yield func(sse.Event, error) bool) {
			if !yield(sse.Event{Name: sse.EventText, Data: sse.TextData{Text: "a"}}, nil) {
				return
			}
			<-r.Context().Done() // the work the iterator waits for, with the request's context
			e.ctxErr = r.Context().Err()
			e.yieldFalse = !yield(sse.Event{Name: sse.EventText, Data: sse.TextData{Text: "late"}}, nil)
		})
		ended <- e
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	resp := open(t, ctx, srv.URL)
	if ev, err := newReader(resp.Body).next(); err != nil || ev.Name != "text" {
		t.Fatalf("first event %v, %v", ev, err)
	}
	cancel() // the browser tab closes
	e := <-ended
	if !errors.Is(e.ctxErr, context.Canceled) || !e.yieldFalse || !errors.Is(e.writeErr, context.Canceled) {
		t.Fatalf("after the client left: request context %v, yield returned false %v, Write %v; want canceled, true, canceled",
			e.ctxErr, e.yieldFalse, e.writeErr)
	}
}

// A ResponseWriter that cannot flush is refused at once, saying so.
func TestNoFlusher(t *testing.T) {
	var w struct{ http.ResponseWriter }
	w.ResponseWriter = httptest.NewRecorder()
	ran := false
	err := sse.Write(w, httptest.NewRequest("GET", "/", nil), func(func(sse.Event, error) bool) { ran = true })
	if err == nil || !strings.Contains(err.Error(), "cannot flush") || ran {
		t.Fatalf("Write = %v (iterator ran: %v), want a refusal naming Flush", err, ran)
	}
}

// A panic in the iterator (on Write's goroutine of its own) goes on in
// the handler's goroutine, where net/http recovers it.
func TestIteratorPanicGoesOnInWrite(t *testing.T) {
	defer func() {
		if v := recover(); v != "boom" {
			t.Fatalf("recovered %v, want the iterator's panic", v)
		}
	}()
	sse.Write(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil), func(yield func(sse.Event, error) bool) {
		yield(sse.Event{Name: "x"}, nil)
		panic("boom")
	})
	t.Fatal("Write returned after the iterator panicked")
}

// Handler serves the events f makes for each request.
func TestHandler(t *testing.T) {
	srv := httptest.NewServer(sse.Handler(func(r *http.Request) iter.Seq2[sse.Event, error] {
		return seq(nil, sse.Event{Name: sse.EventText, Data: sse.TextData{Text: r.URL.Query().Get("q")}})
	}))
	defer srv.Close()
	evs := newReader(open(t, t.Context(), srv.URL+"?q=hi").Body).all(t)
	if len(evs) != 1 || evs[0] != (got{"text", `{"text":"hi"}`}) {
		t.Fatalf("events %v", evs)
	}
}

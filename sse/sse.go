package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"strings"
	"time"
)

// The standard event names (see the package documentation).
const (
	// EventText is a piece of the answer (TextData).
	EventText = "text"
	// EventRestart says: discard what you showed of this answer ({}).
	EventRestart = "restart"
	// EventToolStarted is a tool starting to run (ToolData).
	EventToolStarted = "tool_started"
	// EventToolFinished is a tool that finished (ToolData, Error set when
	// it failed).
	EventToolFinished = "tool_finished"
	// EventError is the call's failure (ErrorData); the last event.
	EventError = "error"
	// EventDone is the call's end with an answer (DoneData); the last
	// event.
	EventDone = "done"
)

// Event is one Server-Sent Event.
type Event struct {
	// Name is the event's type, what a browser's
	// EventSource.addEventListener listens for: one of the Event*
	// constants, or a name of your own. It must not contain a line
	// break. Empty sends no event line: EventSource calls it "message".
	Name string
	// Data is sent JSON-encoded (encoding/json): one of the *Data types
	// of the standard events, or a value of your own. nil sends null.
	Data any
}

// TextData is the data of a "text" event.
type TextData struct {
	// Text is the next piece of the answer.
	Text string `json:"text"`
}

// ToolData is the data of "tool_started" and "tool_finished", and names
// a tool call in DoneData.
type ToolData struct {
	// ID is the tool call's id.
	ID string `json:"id"`
	// Name is the tool's name.
	Name string `json:"name"`
	// Error is true, in "tool_finished", when the tool failed.
	Error bool `json:"error,omitempty"`
	// Arguments is the call's arguments. Left empty unless the code
	// making the events opts in: they can quote the prompt.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Result is the tool's result, in "tool_finished". Left empty unless
	// the code making the events opts in: it can quote private data.
	Result string `json:"result,omitempty"`
	// Replayed is true, in a tool loop's "tool_finished", when the call's
	// recorded result was sent and the tool did not run again (package
	// agent: a retried request); Recovered when its outcome was unknown
	// and its tool's Recover answered.
	Replayed  bool `json:"replayed,omitempty"`
	Recovered bool `json:"recovered,omitempty"`
}

// ErrorData is the data of an "error" event.
type ErrorData struct {
	// Message is a short sentence for the user, chosen by the verdict;
	// never the error's own text.
	Message string `json:"message"`
	// Verdict is chain.VerdictOf's, by name: "retry_later",
	// "bad_request", "unavailable", "canceled" or "over_budget".
	Verdict string `json:"verdict"`
	// Status is the verdict's HTTP status (503, 400, 502, 499, 429): what
	// a service would have answered had the call failed before the
	// stream started.
	Status int `json:"status"`
}

// DoneData is the data of a "done" event.
type DoneData struct {
	// Target is the name of the target (or degradation) that answered.
	Target string `json:"target"`
	// Provider is its provider's name ("anthropic", "openai").
	Provider string `json:"provider,omitempty"`
	// Model is the model that answered.
	Model string `json:"model,omitempty"`
	// Cost is what the call cost, formatted as cost.Cost formats it
	// ("$0.0042", "≥$0.0042" when some tokens had no price).
	Cost string `json:"cost,omitempty"`
	// ToolCalls are the tool calls the answer asks the caller to run (id
	// and name), after they were checked against the tools' schemas.
	ToolCalls []ToolData `json:"tool_calls,omitempty"`
}

// DefaultHeartbeat is the heartbeat when Config.Heartbeat is 0.
const DefaultHeartbeat = 15 * time.Second

// Config configures Write and Handler. The zero Config is the default.
type Config struct {
	// Heartbeat is how long the stream may stay silent before a comment
	// line (": ping") is written, so that proxies and load balancers do
	// not close a stream whose first token is slow. 0 means
	// DefaultHeartbeat (15 s); a negative value sends none.
	Heartbeat time.Duration
}

// Write streams events to w as Server-Sent Events with the zero Config:
// see Config.Write.
func Write(w http.ResponseWriter, r *http.Request, events iter.Seq2[Event, error]) error {
	return Config{}.Write(w, r, events)
}

// Handler returns an http.Handler that streams the events f makes for
// each request, with the zero Config: see Config.Handler.
func Handler(f func(r *http.Request) iter.Seq2[Event, error]) http.Handler {
	return Config{}.Handler(f)
}

// Handler returns an http.Handler that streams the events f makes for
// each request with Config.Write. f should make them with r.Context()
// (see Write). The error Write returns is dropped: to log it, call Write
// from a handler of your own.
func (c Config) Handler(f func(r *http.Request) iter.Seq2[Event, error]) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = c.Write(w, r, f(r))
	})
}

// Write streams events to w as Server-Sent Events: it sets the headers
// and the status (200), then writes and flushes each event as the
// iterator yields it. An error the iterator yields is written as an
// "error" event (ErrorData: a safe message and chain.VerdictOf's
// verdict, never the error's text) and ends the stream.
//
// Write stops reading the events, and the iterator's yield returns false,
// when the client disconnects (r.Context() is done) or a write fails.
// Make the events with r.Context() (chain.Stream(r.Context(), req)), so
// that whatever they wait for is canceled with the request. The iterator
// runs on a goroutine of its own, so that heartbeats go out while it
// waits; Write returns once it has returned, and a panic in it goes on in
// Write's goroutine.
//
// Write returns nil when the events ended without an error, the error
// the iterator yielded, or, when the stream was cut short, the error that
// cut it: the request's context's (the client left), the write's, or
// one saying that w cannot flush or that an event could not be encoded.
func (c Config) Write(w http.ResponseWriter, r *http.Request, events iter.Seq2[Event, error]) error {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return fmt.Errorf("sse: the ResponseWriter cannot flush (%w): wrap it in one that implements http.Flusher", err)
	}

	p := produce(events)
	defer p.stop()

	beat := c.Heartbeat
	if beat == 0 {
		beat = DefaultHeartbeat
	}
	var t *time.Timer
	if beat > 0 {
		t = time.NewTimer(beat)
		defer t.Stop()
	}
	return loop(w, rc, r, p, t, beat)
}

// loop writes what the producer yields until it ends, the client leaves
// or a write fails; t, when not nil, is the heartbeat's timer, reset to
// beat after each write.
func loop(w http.ResponseWriter, rc *http.ResponseController, r *http.Request, p *producer, t *time.Timer, beat time.Duration) error {
	var hb <-chan time.Time
	if t != nil {
		hb = t.C
	}
	done := r.Context().Done()
	var buf bytes.Buffer
	send := func(ev Event) error {
		buf.Reset()
		if err := frame(&buf, ev); err != nil {
			return err
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		if err := rc.Flush(); err != nil {
			return err
		}
		if t != nil {
			t.Reset(beat)
		}
		return nil
	}
	for {
		select {
		case <-done:
			return r.Context().Err()
		case <-hb:
			if _, err := w.Write([]byte(": ping\n\n")); err != nil {
				return err
			}
			if err := rc.Flush(); err != nil {
				return err
			}
			t.Reset(beat)
		case it, ok := <-p.items:
			if !ok {
				p.rethrow()
				return nil
			}
			if it.err != nil {
				if werr := send(errorEvent(it.err)); werr != nil {
					return errors.Join(it.err, werr)
				}
				return it.err
			}
			if err := send(it.ev); err != nil {
				if ee := (*encodeError)(nil); errors.As(err, &ee) {
					// Tell the browser the call ended, not why.
					_ = send(errorEvent(err))
				}
				return err
			}
			p.written <- struct{}{}
		}
	}
}

// encodeError is an event Write could not write: a name with a line
// break, or data encoding/json refused.
type encodeError struct{ err error }

func (e *encodeError) Error() string { return e.err.Error() }
func (e *encodeError) Unwrap() error { return e.err }

// frame appends ev in the wire format to buf: an event line, then the
// JSON data.
func frame(buf *bytes.Buffer, ev Event) error {
	if strings.ContainsAny(ev.Name, "\r\n") {
		return &encodeError{fmt.Errorf("sse: event name %q contains a line break", ev.Name)}
	}
	data, err := json.Marshal(ev.Data)
	if err != nil {
		return &encodeError{fmt.Errorf("sse: event %q: encoding its data: %w", ev.Name, err)}
	}
	if ev.Name != "" {
		buf.WriteString("event: ")
		buf.WriteString(ev.Name)
		buf.WriteByte('\n')
	}
	// encoding/json writes one line (it escapes line breaks in strings and
	// compacts a Marshaler's output): one data line.
	buf.WriteString("data: ")
	buf.Write(data)
	buf.WriteString("\n\n")
	return nil
}

type item struct {
	ev  Event
	err error
}

// producer runs an iterator on its own goroutine and hands its values
// over one by one: yield returns once the value was written (true) or
// the writing stopped (false).
type producer struct {
	items    chan item     // closed when the iterator has returned
	written  chan struct{} // the item handed over was written
	quit     chan struct{} // closed when nothing more is written
	panicked any           // the iterator's panic, read once items is closed
	didPanic bool
}

func produce(events iter.Seq2[Event, error]) *producer {
	p := &producer{items: make(chan item), written: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(p.items)
		defer func() {
			if v := recover(); v != nil {
				p.panicked, p.didPanic = v, true
			}
		}()
		for ev, err := range events {
			select {
			case p.items <- item{ev, err}:
			case <-p.quit:
				return
			}
			select {
			case <-p.written:
			case <-p.quit:
				return
			}
		}
	}()
	return p
}

// stop makes the iterator's yield return false and waits for it to
// return; a panic it ends with goes on here.
func (p *producer) stop() {
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	for range p.items {
	}
	p.rethrow()
}

func (p *producer) rethrow() {
	if p.didPanic {
		v := p.panicked
		p.didPanic = false
		panic(v)
	}
}

package sse

import (
	"errors"
	"iter"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/retry"
)

// Chain returns the events of a chain's stream: "text" for each piece of
// text, "restart" for a Restart chunk (with Builder.RestartStreams), then
// "done" with the Result (DoneData), or the stream's error, which Write
// sends as an "error" event. Make the stream with the request's context,
// chain.Stream(r.Context(), req), so that a browser that leaves cancels
// it.
//
// The chunks' tool calls are not events of their own: nothing runs them
// while the chain streams, and they are only checked against the tools'
// schemas when the answer ends. The "done" event lists the checked calls
// (DoneData.ToolCalls, id and name); a tool loop's events (package agent)
// say when tools run.
//
// Stopping early (Write does when the client leaves) abandons the stream,
// as breaking out of Chunks does; Result then says so.
func Chain(s *chain.Stream) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for ch, err := range s.Chunks() {
			switch {
			case err != nil:
				yield(Event{}, err)
				return
			case ch.Restart:
				if !yield(Event{Name: EventRestart, Data: struct{}{}}, nil) {
					return
				}
			case ch.Text != "":
				if !yield(Event{Name: EventText, Data: TextData{Text: ch.Text}}, nil) {
					return
				}
			}
		}
		res, err := s.Result()
		if err != nil {
			return // yielded above
		}
		d := DoneData{Target: res.Served.Target, Provider: res.Served.Provider, Model: res.Served.Model,
			Cost: res.Cost().String()}
		for _, tc := range res.ToolCalls {
			d.ToolCalls = append(d.ToolCalls, ToolData{ID: tc.ID, Name: tc.Name})
		}
		yield(Event{Name: EventDone, Data: d}, nil)
	}
}

// errorEvent is the "error" event for a call that failed with err: a
// message chosen by its verdict, never err's text.
func errorEvent(err error) Event {
	v := chain.VerdictOf(err)
	if v == retry.VerdictOK {
		v = retry.VerdictRetryLater // an error, whatever it is
	}
	return Event{Name: EventError, Data: ErrorData{Message: message(v, err), Verdict: v.String(), Status: v.HTTPStatus()}}
}

// message is the sentence shown for a call that failed with verdict v.
func message(v retry.Verdict, err error) string {
	switch v {
	case retry.VerdictBadRequest:
		return "This request cannot be answered."
	case retry.VerdictUnavailable:
		return "No model is available to answer."
	case retry.VerdictCanceled:
		return "The request was canceled."
	case retry.VerdictOverBudget:
		return "The spending limit is reached; try again later."
	}
	if errors.Is(err, chain.ErrIncomplete) {
		return "The answer was cut short; try again shortly."
	}
	return "The answer failed; try again shortly."
}

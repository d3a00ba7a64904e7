package sse

import (
	"iter"

	"github.com/backstop-llm/backstop/agent"
)

// Loop returns the events of a tool loop's stream (agent.Loop.Stream):
// "text" for the model's text, "restart" where the chain restarted an
// answer or a retried request's step replaced what was shown, a
// "tool_started" and a "tool_finished" for each call (id and name; Error,
// Replayed and Recovered in "tool_finished", never the arguments or the
// result: they can quote private data), then "done" with the cost of the
// model calls and the last one's target, or the loop's error as Write's
// "error" event. Only calls the chain checked are ever run, so only those
// are ever shown.
//
// Start the loop with the request's context, loop.Stream(r.Context(),
// conv), so that a browser that leaves stops it: no tool starts after.
func Loop(events iter.Seq2[agent.Event, error]) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		for ev, err := range events {
			if err != nil {
				yield(Event{}, err)
				return
			}
			out, ok := loopEvent(ev)
			if ok && !yield(out, nil) {
				return
			}
		}
	}
}

// loopEvent is the Server-Sent Event of ev; false for an event that has
// none (an empty piece of text).
func loopEvent(ev agent.Event) (Event, bool) {
	switch ev.Kind {
	case agent.Text:
		return Event{Name: EventText, Data: TextData{Text: ev.Text}}, ev.Text != ""
	case agent.Restart:
		return Event{Name: EventRestart, Data: struct{}{}}, true
	case agent.ToolStarted:
		return Event{Name: EventToolStarted, Data: ToolData{ID: ev.Call.Call.ID, Name: ev.Call.Call.Name}}, true
	case agent.ToolFinished:
		return Event{Name: EventToolFinished, Data: ToolData{ID: ev.Call.Call.ID, Name: ev.Call.Call.Name,
			Error: ev.Call.IsError, Replayed: ev.Call.Replayed, Recovered: ev.Call.Recovered}}, true
	case agent.Done:
		d := DoneData{}
		if r := ev.Result; r != nil {
			d.Cost = r.Cost().String()
			if n := len(r.Calls); n > 0 {
				s := r.Calls[n-1].Served
				d.Target, d.Provider, d.Model = s.Target, s.Provider, s.Model
			}
		}
		return Event{Name: EventDone, Data: d}, true
	}
	return Event{}, false
}

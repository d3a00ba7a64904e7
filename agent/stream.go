package agent

import (
	"context"
	"fmt"
	"iter"
)

// Kind is what an Event reports.
type Kind uint8

// The kinds of events, in the order a step yields them: its Text (and
// any Restart), then ToolStarted and ToolFinished for each call; Done
// last.
const (
	// Text is the next piece of the model's text (Event.Text).
	Text Kind = iota + 1
	// ToolStarted: a validated call is about to run (Event.Call, no
	// output yet). The calls of a parallel batch start together.
	ToolStarted
	// ToolFinished: a call's result (Event.Call: Output, IsError,
	// Replayed, Recovered), in call order.
	ToolFinished
	// Restart: the model's answer so far failed and the chain moved on
	// (or another request recorded this step first): discard the text
	// shown since the step began.
	Restart
	// Done ends the stream (Event.Result); when the loop failed, its
	// error comes with it.
	Done
)

// String returns the kind's name: text, tool_started, tool_finished,
// restart, done.
func (k Kind) String() string {
	switch k {
	case Text:
		return "text"
	case ToolStarted:
		return "tool_started"
	case ToolFinished:
		return "tool_finished"
	case Restart:
		return "restart"
	case Done:
		return "done"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Event is one thing a streamed loop reports.
type Event struct {
	Kind Kind
	// Step is the place of the step the event belongs to (Step.Index).
	Step int
	// Text is the text of a Text event.
	Text string
	// Call is the call of a ToolStarted or ToolFinished event.
	Call *ToolRun
	// Result is the loop's Result, in the Done event.
	Result *Result
}

// Stream runs the loop as Run does and yields what happens, in order:
// the model's text as it arrives, its restarts, each call as it starts
// and finishes. Tool calls are taken from each turn's validated answer
// once the turn's stream has ended, so no invalid call is ever run or
// yielded. The last event is Done, with the Result, and the loop's error
// when it failed (the only event with an error). Breaking out of the loop
// stops the run: the turn's stream is abandoned and no other tool starts.
func (l *Loop) Stream(ctx context.Context, conv Conversation) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		res, err := l.run(ctx, conv, func(ev Event) bool { return yield(ev, nil) })
		if err == errGone {
			return
		}
		yield(Event{Kind: Done, Result: res}, err)
	}
}

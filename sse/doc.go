// Package sse streams an answer to a browser as Server-Sent Events: a
// chain's (Chain converts a chain.Stream) or a tool loop's (Loop converts
// an agent.Loop's Stream), through the same Event type.
//
//	http.HandleFunc("/answer", func(w http.ResponseWriter, r *http.Request) {
//		s := c.Stream(r.Context(), requestFrom(r)) // r.Context(): see below
//		if err := sse.Write(w, r, sse.Chain(s)); err != nil {
//			log.Printf("answer: %v", err) // the browser was told only a safe message
//		}
//	})
//
// Write sets the headers (Content-Type: text/event-stream, Cache-Control:
// no-cache, X-Accel-Buffering: no, which tells nginx not to buffer), then
// writes each event as
//
//	event: <name>
//	data: <the event's Data, as JSON>
//
// and flushes it at once: the browser shows each piece as the model writes
// it. While nothing happens it writes a comment line (": ping") every
// Config.Heartbeat (15 s by default), so that a proxy does not cut a call
// whose first token is slow.
//
// # The events
//
// The standard events, and their data (a JSON object):
//
//   - "text" (TextData): the next piece of the answer: append it.
//   - "restart" ({}): discard what you showed of this answer: the chain
//     restarted it on another target (chain.Builder.RestartStreams), and
//     the text events after it are a new answer.
//   - "tool_started", "tool_finished" (ToolData): a tool of a tool loop
//     runs, and has finished (with whether it failed). They carry the
//     call's id and name, never its arguments or result unless the code
//     making the events opts in: both can quote the prompt or the answer.
//   - "error" (ErrorData): the call failed. A short message written for
//     the user and the verdict of chain.VerdictOf with its HTTP status,
//     never the error's text, which can quote a provider's message and
//     through it the prompt. It is the last event.
//   - "done" (DoneData): the call ended with an answer: the target that
//     served it, its cost, and the tool calls the answer asks for. It is
//     the last event.
//
// A browser's EventSource reconnects, and so asks again, when the stream
// ends: the page closes it on "done" and on "error". EventSource also
// fires "error" when the connection is lost, then with no data. The
// snippet in docs/concepts.md ("Streaming to a browser") does both.
//
// # Ending the call
//
// Write stops reading the events when the client disconnects or a write
// to it fails. The code making the events only notices when it next
// yields, so give it the request's context: a chain.Stream made with
// r.Context() is canceled as soon as the browser leaves, and its provider
// stream with it; Write returns once the events' iterator has returned.
//
// A Server's WriteTimeout cuts every stream that outlives it; lift it for
// the streaming handler with
// http.NewResponseController(w).SetWriteDeadline(time.Time{}).
package sse

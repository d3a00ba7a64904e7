package llm

import "context"

// StreamProvider is a Provider that can also stream an answer. Stream
// makes exactly one attempt, like Complete: one HTTP request, no retries
// inside. It returns once the response has started (status and headers
// read); a failure before that is returned as Complete would return it.
type StreamProvider interface {
	Provider
	Stream(ctx context.Context, req Request) (Stream, error)
}

// Stream is one answer arriving in chunks. It is not safe for concurrent
// use. The caller must Close it, whether or not it read to the end.
type Stream interface {
	// Next returns the next piece of the answer: text, or a tool call
	// once the provider has sent all of it. At the end of a
	// complete answer it returns io.EOF; a failure after the response
	// started (an error event after a 200, a cut connection, a malformed
	// event) is returned as an *Error, classified like any other.
	Next() (Chunk, error)
	// Response returns the answer assembled so far: the text of every
	// chunk returned, and the model, id, request-id, usage and finish
	// reason the provider has sent. After io.EOF it is the whole answer.
	Response() *Response
	// Close releases the connection. It is safe to call more than once.
	Close() error
}

// Chunk is one piece of a streamed answer.
type Chunk struct {
	// Text is the piece of the answer's text.
	Text string
	// ToolCall is a tool call the model finished making (its arguments
	// assembled from the provider's deltas); nil in a text chunk. The
	// calls are also in Response().ToolCalls.
	ToolCall *ToolCall
}

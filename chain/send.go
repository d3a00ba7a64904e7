package chain

// The sender: how the walk makes one attempt, whole or streamed.

import (
	"context"

	"github.com/backstop-llm/backstop/internal/latency"
	"github.com/backstop-llm/backstop/llm"
)

// sender makes one attempt. Call's (stream nil) sends the request and
// returns the whole answer; Stream's opens a stream and returns once its
// first chunk is read, and commits: it keeps its own copy of the attempt,
// which goes on after the walk, and ends it itself. It is a struct, not an
// interface, so that the attempt it is given stays on the walk's stack.
type sender struct{ stream *Stream }

// send makes attempt a, sending req, under ctx, counting it in flight on
// its target's load (the walk ends the count when it ends the attempt). A
// stream opens into st, or into the Stream's own state when st is nil (a
// hedged race gives each attempt its own). A provider that panics first
// gives back what a holds (abandon); policies that hold nothing and no
// count need no guard, and the healthy path pays for no defer.
func (s sender) send(ctx context.Context, a *attempt, req *llm.Request, st *streamState) (*llm.Response, error) {
	if s.stream == nil && a.t.load == nil && !a.holds.Holding() {
		return a.t.Provider.Complete(ctx, *req) // nothing to stream, count or give back
	}
	return s.watched(ctx, a, req, st)
}

// watched is send for an attempt that streams, is counted or holds
// something of its policies'.
func (s sender) watched(ctx context.Context, a *attempt, req *llm.Request, st *streamState) (*llm.Response, error) {
	if a.t.load != nil {
		a.t.load.Start()
	}
	if a.holds.Holding() || a.t.load != nil {
		return s.guarded(ctx, a, req, st)
	}
	return s.open(ctx, a, req, st)
}

// guarded is open, giving back what a holds if its provider panics.
func (s sender) guarded(ctx context.Context, a *attempt, req *llm.Request, st *streamState) (*llm.Response, error) {
	defer a.abandon()
	return s.open(ctx, a, req, st)
}

// open sends req to a's provider: a stream when s streams and the
// provider can, the whole answer otherwise.
func (s sender) open(ctx context.Context, a *attempt, req *llm.Request, st *streamState) (*llm.Response, error) {
	if s.stream != nil {
		if sp, ok := a.t.Provider.(llm.StreamProvider); ok {
			if st == nil {
				st = &s.stream.st
			}
			return st.open(ctx, sp, a, req)
		}
	}
	return a.t.Provider.Complete(ctx, *req)
}

// commits reports whether an answer send returned for t is still
// arriving, to be validated, recorded and settled by the stream.
func (s sender) commits(t *target) bool {
	if s.stream == nil {
		return false
	}
	_, ok := t.Provider.(llm.StreamProvider)
	return ok
}

// firstChunkAt notes that attempt a, a stream, sent its first chunk now:
// a sample of its tier's answer times for adaptive hedges, and of its
// target's first-chunk times for its patience (a chain of one races
// nothing).
func (w *walk) firstChunkAt(a *attempt) {
	var firsts *latency.Window
	if len(w.c.targets) > 1 {
		firsts = &a.t.firsts
	}
	a.t.group.FirstChunk(firsts, w.c.clock()-a.start)
}

package chain_test

import (
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/breaker"
	"github.com/backstop-llm/backstop/budget"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/hedge"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
	"github.com/backstop-llm/backstop/throttle"
)

// streamer is an llm.StreamProvider whose streams follow a script.
type streamer struct {
	stub
	chunks  []string
	every   time.Duration
	failAt  int // fail after this many chunks (0: never)
	stallAt int // block after this many chunks until the context ends (0: never)
	opened  int
}

type script struct {
	p    *streamer
	ctx  context.Context
	i    int
	text strings.Builder
	done bool
}

func (p *streamer) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	p.opened++
	if p.fn != nil {
		if _, err := p.fn(ctx, req); err != nil {
			return nil, err
		}
	}
	return &script{p: p, ctx: ctx}, nil
}

func (s *script) Next() (llm.Chunk, error) {
	p := s.p
	if s.done {
		return llm.Chunk{}, errors.New("closed")
	}
	if p.stallAt > 0 && s.i == p.stallAt {
		<-s.ctx.Done()
		return llm.Chunk{}, &llm.Error{Provider: "stub", Kind: llm.KindCanceled, Err: s.ctx.Err()}
	}
	if p.failAt > 0 && s.i == p.failAt {
		return llm.Chunk{}, &llm.Error{Provider: "stub", Status: 200, Kind: llm.KindOverloaded, Type: "overloaded_error"}
	}
	if s.i == len(p.chunks) {
		return llm.Chunk{}, io.EOF
	}
	if p.every > 0 {
		select {
		case <-time.After(p.every):
		case <-s.ctx.Done():
			return llm.Chunk{}, &llm.Error{Provider: "stub", Kind: llm.KindCanceled, Err: s.ctx.Err()}
		}
	}
	c := p.chunks[s.i]
	s.i++
	s.text.WriteString(c)
	return llm.Chunk{Text: c}, nil
}

func (s *script) Response() *llm.Response {
	return &llm.Response{Text: s.text.String(), Model: "m", RequestID: "req_stream"}
}
func (s *script) Close() error { s.done = true; return nil }

func collect(t *testing.T, s *chain.Stream) (chunks []chain.Chunk, err error) {
	t.Helper()
	for c, e := range s.Chunks() {
		if e != nil {
			err = e
			continue
		}
		chunks = append(chunks, c)
	}
	return chunks, err
}

func texts(cs []chain.Chunk) string {
	var b strings.Builder
	for _, c := range cs {
		if c.Restart {
			b.WriteString("|RESTART|")
		}
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestStreamFromAProviderThatOnlyCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: &stub{name: "a"}, Model: "m"}).Build()
		chunks, err := collect(t, c.Stream(t.Context(), question))
		if err != nil || texts(chunks) != "ok" {
			t.Fatalf("%q %v", texts(chunks), err)
		}
	})
}

// step is one Next of an rprov stream: a chunk (text or a tool call), an
// error or a panic.
type step struct {
	text  string
	call  *llm.ToolCall
	err   error
	panic bool
}

// rprov is a StreamProvider whose every stream plays steps; openErr fails
// Stream itself. Next fails like the real adapters once ctx has ended.
type rprov struct {
	name    string
	steps   []step
	openErr error
	rl      llm.RateLimit
	every   time.Duration // between chunks
	opened  int
}

type rstream struct {
	p     *rprov
	ctx   context.Context
	i     int
	text  strings.Builder
	calls []llm.ToolCall
}

func (p *rprov) Name() string { return p.name }
func (p *rprov) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: "whole", Model: req.Model, RateLimit: p.rl}, nil
}
func (p *rprov) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	p.opened++
	if p.openErr != nil {
		return nil, p.openErr
	}
	return &rstream{p: p, ctx: ctx}, nil
}
func (s *rstream) Next() (llm.Chunk, error) {
	if err := s.ctx.Err(); err != nil {
		kind := llm.KindCanceled
		if errors.Is(err, context.DeadlineExceeded) {
			kind = llm.KindTimeout
		}
		return llm.Chunk{}, &llm.Error{Provider: s.p.name, Kind: kind, Err: err}
	}
	if s.i == len(s.p.steps) {
		return llm.Chunk{}, io.EOF
	}
	if s.p.every > 0 {
		select {
		case <-time.After(s.p.every):
		case <-s.ctx.Done():
			return s.Next() // fails as above
		}
	}
	st := s.p.steps[s.i]
	s.i++
	switch {
	case st.panic:
		panic("provider bug mid-stream")
	case st.err != nil:
		return llm.Chunk{}, st.err
	}
	s.text.WriteString(st.text)
	if st.call != nil {
		s.calls = append(s.calls, *st.call)
	}
	return llm.Chunk{Text: st.text, ToolCall: st.call}, nil
}
func (s *rstream) Response() *llm.Response {
	return &llm.Response{Text: s.text.String(), Model: "m", RequestID: "req_" + s.p.name, RateLimit: s.p.rl, ToolCalls: s.calls}
}
func (s *rstream) Close() error { return nil }

func chunks(texts ...string) []step {
	out := make([]step, len(texts))
	for i, t := range texts {
		out[i] = step{text: t}
	}
	return out
}

// 1. The committed stream is never reported to the throttle: with Learn,
// a streamed-only target stays on the provisional 1 request/second forever,
// while Call learns the provider's 6000 RPM from the first answer.
func TestStreamReportsToTheThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Nothing remains: a learned limit paces the next call 10ms away.
		rl := llm.RateLimit{Requests: llm.Allowance{Limit: 6000, Remaining: 0}}
		build := func() *chain.Chain {
			p := &rprov{name: "a", steps: chunks("hello"), rl: rl}
			c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m",
				Throttle: throttle.Config{Learn: true}}).Build()
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		// Call: the second call waits 10ms (100/s learned).
		c := build()
		c.Call(t.Context(), question)
		res, _ := c.Call(t.Context(), question)
		callWait := res.Attempts[0].Wait
		// Stream: the second call waits the provisional 1s.
		c = build()
		collect(t, c.Stream(t.Context(), question))
		s := c.Stream(t.Context(), question)
		collect(t, s)
		res, _ = s.Result()
		streamWait := res.Attempts[0].Wait
		if streamWait > 10*callWait {
			t.Fatalf("the limit was never learned from streamed answers: second Call waited %v, second Stream %v", callWait, streamWait)
		}
	})
}

// Calls waiting on slots granted at Learn's provisional pace (one request
// a second until the first headers) are re-spaced when the first answer
// teaches the limit: they go at the learned pace instead of draining the
// provisional queue, and the whole wait stays within MaxWait from when
// each call asked.
func TestLearnedLimitRespacesWaitingCalls(t *testing.T) {
	// learning runs n calls at once against a target that answers after
	// 1.5s announcing rl, and returns their results once all have ended.
	learning := func(t *testing.T, n int, rl llm.RateLimit, maxWait time.Duration) []*chain.Result {
		p := &stub{name: "a", fn: func(ctx context.Context, req llm.Request) (*llm.Response, error) {
			time.Sleep(1500 * time.Millisecond)
			return &llm.Response{Text: "ok", Model: req.Model, RateLimit: rl}, nil
		}}
		c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m",
			Throttle: throttle.Config{Learn: true, MaxWait: maxWait}}).Build()
		if err != nil {
			t.Fatal(err)
		}
		results := make([]*chain.Result, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { results[i], _ = c.Call(t.Context(), question) })
		}
		wg.Wait()
		return results
	}
	waits := func(results []*chain.Result) []time.Duration {
		var ws []time.Duration
		for _, res := range results {
			ws = append(ws, res.Attempts[0].Wait)
		}
		slices.Sort(ws)
		return ws
	}

	t.Run("re-spaced", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// Provisional slots at 0, 1s, ... 9s. The first answer, at
			// 1.5s, says 600 a minute with 4 remaining: the eight calls
			// still waiting take their slots again then, four at once and
			// the rest 100ms apart.
			rl := llm.RateLimit{Requests: llm.Allowance{Limit: 600, Remaining: 4}}
			got := waits(learning(t, 10, rl, time.Minute))
			ms := func(d ...int) (out []time.Duration) {
				for _, v := range d {
					out = append(out, time.Duration(v)*time.Millisecond)
				}
				return out
			}
			if want := ms(0, 1000, 1500, 1500, 1500, 1500, 1600, 1700, 1800, 1900); !slices.Equal(got, want) {
				t.Fatalf("waits %v, want %v", got, want)
			}
		})
	})
	t.Run("within MaxWait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// MaxWait 2s grants the provisional slots at 0, 1s and 2s. At
			// 1.5s the limit is learned as 40 a minute with none remaining:
			// the third call's next slot is 1.5s away, within MaxWait from
			// then but not from when it asked, so it is refused, having
			// waited 1.5s.
			rl := llm.RateLimit{Requests: llm.Allowance{Limit: 40, Remaining: 0}}
			results := learning(t, 3, rl, 2*time.Second)
			var refused *chain.Result
			for _, res := range results {
				if res.Attempts[0].Decision == chain.DecisionSkip {
					refused = res
				}
			}
			if refused == nil {
				t.Fatalf("no call was refused: waits %v", waits(results))
			}
			if a := refused.Attempts[0]; a.Wait != 1500*time.Millisecond || !errors.Is(a.Err, throttle.ErrThrottled) {
				t.Fatalf("the refused call's record: waited %v, err %v; want 1.5s and ErrThrottled", a.Wait, a.Err)
			}
		})
	})
}

// 2. The idle timer runs while the caller's loop body runs: a caller that
// takes longer than IdleTimeout over one chunk has a healthy stream killed
// as a provider Timeout, and the target's breaker charged for it.
func TestIdleTimeoutExcludesTheCallersTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &rprov{name: "a", steps: chunks("a", "b", "c")}
		c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m", IdleTimeout: 2 * time.Second,
			Breaker: breaker.Config{ConsecutiveFailures: 1}}).Build()
		var err error
		for ch, e := range c.Stream(t.Context(), question).Chunks() {
			if e != nil {
				err = e
				break
			}
			if ch.Text == "a" {
				time.Sleep(3 * time.Second) // a slow consumer: writing to a slow client
			}
		}
		if err != nil {
			s := c.Stream(t.Context(), question)
			_, err2 := collect(t, s)
			t.Fatalf("provider answered at once, but the stream failed with %v (kind %v); next call: %v", err, llm.KindOf(err), err2)
		}
	})
}

// 3. A restart ignores the decision table's fallback column: a content
// refusal mid-stream moves on to another provider although ContentFallback
// is off (a BadRequest, whose rule is Stop, does the same).
func TestRestartFollowsTheFallbackRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		refusal := &llm.Error{Provider: "a", Status: 200, Kind: llm.KindContentFilter, Type: "refusal"}
		p := &rprov{name: "a", steps: append(chunks("I will "), step{err: refusal})}
		o := &rprov{name: "o", steps: chunks("Sure: the forbidden answer.")}
		c, _ := chain.New("c").RestartStreams(true).Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
			OrProvider(chain.Target{Name: "o", Provider: o, Model: "g"}).Build()
		_, err := collect(t, c.Stream(t.Context(), question))
		if o.opened != 0 {
			t.Fatalf("a content refusal was restarted on another provider without ContentFallback (err %v)", err)
		}
	})
}

// 4. A restart forgets what the walk learnt: a target whose ContextWindow
// is too small is tried again after the restart, and the ExhaustedError
// loses every cause from before the restart (the stream's own failure too).
func TestRestartKeepsTheContextWindowAndTheCauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tooLong := &llm.Error{Provider: "x", Status: 400, Kind: llm.KindContextLength, Message: "prompt is too long"}
		overloaded := &llm.Error{Provider: "b", Status: 200, Kind: llm.KindOverloaded}
		a := &rprov{name: "a", openErr: tooLong}
		b := &rprov{name: "b", steps: append(chunks("One "), step{err: overloaded})}
		small := &rprov{name: "c", openErr: tooLong}
		c, err := chain.New("c").RestartStreams(true).
			Primary(chain.Target{Name: "A", Provider: a, Model: "m", ContextWindow: 100}).
			OrProvider(chain.Target{Name: "B", Provider: b, Model: "m", ContextWindow: 200}).
			OrProvider(chain.Target{Name: "C", Provider: small, Model: "m", ContextWindow: 100}).Build()
		if err != nil {
			t.Fatal(err)
		}
		s := c.Stream(t.Context(), question)
		_, err = collect(t, s)
		if small.opened != 0 {
			t.Errorf("target C (window 100) was tried after a restart although A (window 100) overflowed")
		}
		if !strings.Contains(err.Error(), `"B"`) || !strings.Contains(err.Error(), `"A"`) {
			t.Errorf("the error after a restart forgets the earlier targets: %v", err)
		}
	})
}

// 5. A caller that stops at the Restart chunk gets a nil error and a
// Result served by the target that just failed, holding its partial text.
func TestAbandonAtRestartIsNotServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &rprov{name: "a", steps: append(chunks("One ", "two "), step{err: &llm.Error{Provider: "a", Status: 200, Kind: llm.KindOverloaded}})}
		o := &rprov{name: "o", steps: chunks("Fresh.")}
		c, _ := chain.New("c").RestartStreams(true).Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
			OrProvider(chain.Target{Name: "o", Provider: o, Model: "g"}).Build()
		s := c.Stream(t.Context(), question)
		for ch, err := range s.Chunks() {
			if err != nil || ch.Restart {
				break
			}
		}
		res, err := s.Result()
		if err == nil && res.Served.Target == "p" {
			t.Fatalf("abandoned at the restart: err nil, served by the failed target %q with %q", res.Served.Target, res.Text)
		}
		// Nothing of the next answer was read: abandoned, served by no one,
		// with no text (the Restart discarded the partial answer).
		if !errors.Is(err, chain.ErrAbandoned) || res.Served != (chain.Served{}) || res.Text != "" {
			t.Fatalf("abandoned at the restart: err %v, served %+v, text %q", err, res.Served, res.Text)
		}
	})
}

// 6. A non-streaming provider answering (nil, nil) is an Unknown failure
// for Call, but a nil-pointer panic for Stream (try's commit path reads
// resp.RequestID).
func TestNilAnswerInAStreamIsAFailure(t *testing.T) {
	p := &stub{name: "a", fn: func(context.Context, llm.Request) (*llm.Response, error) { return nil, nil }}
	c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m", Retry: retry.Policy{MaxAttempts: 1}}).Build()
	if _, err := c.Call(t.Context(), question); llm.KindOf(err) != llm.KindUnknown {
		t.Fatalf("Call: %v", err)
	}
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Stream panicked: %v", r)
		}
	}()
	collect(t, c.Stream(t.Context(), question))
}

// 7. A provider that panics mid-stream during a half-open probe leaves the
// probe's ticket unreported: the breaker stays half-open with its one slot
// taken, and the target is skipped for good. (A panic while the stream
// opens is guarded where every send is: attempt.abandon.) A panic in the
// caller's loop body does the same.
func TestPanicMidStreamReleasesTheProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &rprov{name: "a", openErr: &llm.Error{Provider: "a", Status: 529, Kind: llm.KindOverloaded}}
		c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m", Retry: retry.Policy{MaxAttempts: 1},
			Breaker: breaker.Config{ConsecutiveFailures: 1, OpenFor: 10 * time.Second}}).Build()
		collect(t, c.Stream(t.Context(), question)) // opens the breaker
		time.Sleep(11 * time.Second)
		p.openErr, p.steps = nil, []step{{text: "a"}, {panic: true}}
		func() {
			defer func() { recover() }()
			collect(t, c.Stream(t.Context(), question)) // the probe panics
		}()
		p.steps = chunks("fine")
		time.Sleep(time.Hour)
		s := c.Stream(t.Context(), question)
		_, err := collect(t, s)
		if err != nil {
			res, _ := s.Result()
			t.Fatalf("an hour after the panic the target is still refused: %v (attempts %v)", err, res.Attempts)
		}
	})
}

// 8. A provider that reports its context's end as KindCanceled (as the
// package's own script stub does) and is cut by the chain's deadline
// mid-stream ends the call as if the caller had canceled: no ErrIncomplete,
// Kind Canceled. try() remaps such a KindCanceled to Unknown; classify
// does not.
func TestDeadlineMidStreamIsNotACancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &streamer{stub: stub{name: "a"}, chunks: []string{"a", "b", "c", "d", "e"}, every: time.Second}
		c, _ := chain.New("c").Deadline(2500 * time.Millisecond).Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
		_, err := collect(t, c.Stream(t.Context(), question))
		if !errors.Is(err, chain.ErrIncomplete) || llm.KindOf(err) == llm.KindCanceled {
			t.Fatalf("cut by the deadline after 2 chunks: err %v, kind %v, ErrIncomplete %v", err, llm.KindOf(err), errors.Is(err, chain.ErrIncomplete))
		}
	})
}

// 9. An abandoned stream's first attempt is never recorded in the budget:
// a ratio budget sees no first attempts from chat users who stop reading.
// firstsCounted is a budget that counts the first attempts it is told of.
type firstsCounted struct {
	budget.Budget
	firsts atomic.Int64
}

func (f *firstsCounted) Record(ctx context.Context, o budget.Outcome) {
	if !o.Retry {
		f.firsts.Add(1)
	}
	f.Budget.Record(ctx, o)
}

func TestAbandonedStreamIsRecordedInTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := budget.NewRatio(budget.RatioConfig{})
		b := &firstsCounted{Budget: r}
		p := &rprov{name: "a", steps: chunks("a", "b", "c")}
		c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m", Budget: b}).Build()
		for range 3 {
			for range c.Stream(t.Context(), question).Chunks() {
				break
			}
		}
		if firsts := b.firsts.Load(); firsts != 3 {
			t.Fatalf("3 first attempts sent, budget recorded %d", firsts)
		}
	})
}

// 10. A non-streaming provider's answer is shown before it is validated:
// an invalid answer is not re-asked as Call does (nothing had been shown
// when it arrived), it ends the stream as ErrIncomplete after the caller
// saw the whole invalid text.
func TestWholeAnswerIsValidatedBeforeItIsShown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := 0
		p := &stub{name: "a", fn: func(context.Context, llm.Request) (*llm.Response, error) {
			n++
			if n%2 == 1 {
				return &llm.Response{Text: "not json"}, nil
			}
			return &llm.Response{Text: `{"status":"shipped"}`}, nil
		}}
		c, _ := chain.New("c").Schema([]byte(`{"type":"object","required":["status"]}`)).
			Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
		if _, err := c.Call(t.Context(), question); err != nil {
			t.Fatalf("Call: %v", err)
		}
		cs, err := collect(t, c.Stream(t.Context(), question))
		if err != nil {
			t.Fatalf("Stream showed %q then failed: %v (Call re-asked and succeeded)", texts(cs), err)
		}
	})
}

// 11. A long answer cut by the chain's deadline while the provider was
// sending a chunk a second counts as a breaker failure: finish reports
// every mid-stream Timeout as Failure, without try's fair() exclusion and
// although the time went to a long answer (or a slow reader), not to a
// hanging provider. One such stream opens a ConsecutiveFailures: 1 breaker.
func TestDeadlineMidStreamDoesNotChargeTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &rprov{name: "a", steps: chunks("a", "b", "c", "d", "e"), every: time.Second}
		c, _ := chain.New("c").Deadline(2500 * time.Millisecond).Primary(chain.Target{Name: "p", Provider: p, Model: "m",
			Breaker: breaker.Config{ConsecutiveFailures: 1}}).Build()
		_, err := collect(t, c.Stream(t.Context(), question))
		if llm.KindOf(err) != llm.KindTimeout {
			t.Fatalf("kind %v: %v", llm.KindOf(err), err)
		}
		p.every = 0
		if _, err := collect(t, c.Stream(t.Context(), question)); err != nil {
			t.Fatalf("a target streaming steadily had its breaker opened by our deadline: %v", err)
		}
	})
}

// tinyDeltas is an llm.StreamProvider whose every stream sends n chunks of
// the same 4 bytes, allocating nothing per chunk, so that what a benchmark
// of it measures is the chain's own work per chunk.
type tinyDeltas struct {
	n      int
	answer string // the n chunks joined: what Response's Text is cut from
}

const tinyDelta = "abcd"

func newTinyDeltas(n int) *tinyDeltas {
	return &tinyDeltas{n: n, answer: strings.Repeat(tinyDelta, n)}
}

func (p *tinyDeltas) Name() string { return "tiny" }
func (p *tinyDeltas) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: p.answer}, nil
}
func (p *tinyDeltas) Stream(context.Context, llm.Request) (llm.Stream, error) {
	return &tinyStream{p: p}, nil
}

type tinyStream struct {
	p *tinyDeltas
	i int
}

func (s *tinyStream) Next() (llm.Chunk, error) {
	if s.i == s.p.n {
		return llm.Chunk{}, io.EOF
	}
	s.i++
	return llm.Chunk{Text: tinyDelta}, nil
}
func (s *tinyStream) Response() *llm.Response {
	return &llm.Response{Text: s.p.answer[:s.i*len(tinyDelta)], Model: "m", RequestID: "req"}
}
func (s *tinyStream) Close() error { return nil }

// 12. Assembling a stream is quadratic: the relay rebuilds the whole text
// on every chunk, so 16,000 deltas of 4 bytes (a 64 KB answer) allocate
// 527 MiB. A stream must allocate a bounded multiple of its size.
func TestStreamAllocatesLinearly(t *testing.T) {
	p := newTinyDeltas(16000)
	c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := c.Stream(t.Context(), question)
	for _, err := range s.Chunks() {
		if err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	res, err := s.Result()
	if err != nil || res.Text != p.answer {
		t.Fatalf("%d bytes of %d, %v", len(res.Text), len(p.answer), err)
	}
	if got, bound := after.TotalAlloc-before.TotalAlloc, 64*uint64(len(p.answer)); got > bound {
		t.Fatalf("a stream of %d chunks (%d bytes) allocated %d bytes, %.0f per answer byte; want under %d (64 per byte)",
			p.n, len(p.answer), got, float64(got)/float64(len(p.answer)), bound)
	}
}

// 13. An abandoned stream's Result has a nil error and an empty Served: the
// caller cannot tell a stream it broke out of from a complete answer, nor
// who sent what it read.
func TestAbandonedStreamSaysSo(t *testing.T) {
	for _, tt := range []struct {
		name  string
		after int // chunks read before the break
		want  string
	}{
		{"at the first chunk", 1, "One "},
		{"mid-stream", 2, "One two "},
		{"at the last chunk", 3, "One two three"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &rprov{name: "a", steps: chunks("One ", "two ", "three")}
			c, _ := chain.New("support").Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).Build()
			s := c.Stream(t.Context(), question)
			n := 0
			for _, err := range s.Chunks() {
				if err != nil {
					t.Fatal(err)
				}
				if n++; n == tt.after {
					break
				}
			}
			res, err := s.Result()
			if !errors.Is(err, chain.ErrAbandoned) || !strings.Contains(err.Error(), `"support"`) {
				t.Errorf("Result error %v, want ErrAbandoned naming the chain", err)
			}
			if res == nil {
				t.Fatal("no Result")
			}
			if res.Served.Target != "p" || res.Served.Provider != "a" || res.Served.RequestID != "req_a" || res.Text != tt.want {
				t.Errorf("Result served by %+v with %q, want target p with %q", res.Served, res.Text, tt.want)
			}
			if a := res.Attempts[len(res.Attempts)-1]; a.Kind != llm.KindCanceled || a.Decision != chain.DecisionStop || !errors.Is(a.Err, chain.ErrAbandoned) {
				t.Errorf("the abandoned attempt is recorded as %v", a)
			}
		})
	}
}

// nextPanics is a StreamProvider whose streams send "a", "b", "c" but
// panic in their Nth Next (from 1), counting the streams it opened and
// the Closes they were given.
type nextPanics struct {
	name    string
	nth     int
	every   time.Duration // before each chunk
	openErr error
	mu      sync.Mutex
	opened  int
	closes  int
}

type nextPanicsStream struct {
	p    *nextPanics
	ctx  context.Context
	i    int
	text strings.Builder
}

func (p *nextPanics) Name() string { return p.name }
func (p *nextPanics) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return &llm.Response{Text: "whole"}, nil
}
func (p *nextPanics) Stream(ctx context.Context, req llm.Request) (llm.Stream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.openErr != nil {
		return nil, p.openErr
	}
	p.opened++
	return &nextPanicsStream{p: p, ctx: ctx}, nil
}
func (s *nextPanicsStream) Next() (llm.Chunk, error) {
	s.i++
	if s.p.every > 0 {
		select {
		case <-time.After(s.p.every):
		case <-s.ctx.Done():
			return llm.Chunk{}, &llm.Error{Provider: s.p.name, Kind: llm.KindCanceled, Err: s.ctx.Err()}
		}
	}
	if s.i == s.p.nth {
		panic("provider bug in Next")
	}
	if s.i > 3 {
		return llm.Chunk{}, io.EOF
	}
	c := string(rune('a' + s.i - 1))
	s.text.WriteString(c)
	return llm.Chunk{Text: c}, nil
}
func (s *nextPanicsStream) Response() *llm.Response {
	return &llm.Response{Text: s.text.String(), Model: "m", RequestID: "req_" + s.p.name}
}
func (s *nextPanicsStream) Close() error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.closes++
	return nil
}

// counts returns how many streams p opened and how many Closes they got.
func (p *nextPanics) counts() (opened, closes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.opened, p.closes
}

// TestPanicInAStreamsNextClosesItOnce: a provider stream whose Next
// panics, its first (the chain reads it before the stream is the call's)
// or a later one, is closed exactly once, releasing its connection; what
// its attempt holds is given back (here a half-open breaker's probe slot:
// the target is probed again later, not skipped for good); and the panic
// reaches the caller, as a provider's panic in Complete does. A hedge
// whose stream panics so is closed too.
func TestPanicInAStreamsNextClosesItOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		nth    int
		hedged bool
	}{
		{"first Next", 1, false},
		{"a later Next", 2, false},
		{"a hedge's first Next", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &nextPanics{name: "a", nth: tc.nth, openErr: &llm.Error{Provider: "a", Status: 529, Kind: llm.KindOverloaded}}
				b := chain.New("c")
				target := chain.Target{Name: "p", Provider: p, Model: "m", Retry: retry.Policy{MaxAttempts: 1},
					Breaker: breaker.Config{ConsecutiveFailures: 1, OpenFor: 10 * time.Second}}
				if tc.hedged {
					b.Hedge(hedge.Config{Delay: time.Second})
					slow := &rprov{name: "slow", steps: chunks("slow"), every: time.Minute}
					b.Primary(chain.Target{Name: "slow", Provider: slow, Model: "m"})
					b.OrDeployment(target)
				} else {
					b.Primary(target)
				}
				c, err := b.Build()
				if err != nil {
					t.Fatal(err)
				}
				if tc.hedged {
					p.openErr = nil
					p.every = 10 * time.Millisecond
				} else {
					collect(t, c.Stream(t.Context(), question)) // opens the breaker
					time.Sleep(11 * time.Second)                // due to probe
					p.mu.Lock()
					p.openErr = nil
					p.mu.Unlock()
				}
				func() {
					defer func() {
						if r := recover(); r != "provider bug in Next" {
							t.Fatalf("the stream panicked with %v, want the provider's panic", r)
						}
					}()
					collect(t, c.Stream(t.Context(), question))
				}()
				synctest.Wait()
				if opened, closes := p.counts(); opened != 1 || closes != 1 {
					t.Fatalf("%d streams opened, closed %d times; want the one closed once", opened, closes)
				}
				if tc.hedged {
					return
				}
				p.nth = 0 // healthy from now on
				time.Sleep(time.Hour)
				s := c.Stream(t.Context(), question)
				if _, err := collect(t, s); err != nil {
					res, _ := s.Result()
					t.Fatalf("an hour after the panic the target is still refused: %v\n%s", err, lines(res))
				}
			})
		})
	}
}

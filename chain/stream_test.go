package chain_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/retry"
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

func TestStreamFailureBeforeTheFirstChunkFallsBackCleanly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		bad := &streamer{stub: stub{name: "a", fn: fail(llm.KindOverloaded, 529)}}
		good := &streamer{stub: stub{name: "o"}, chunks: []string{"Your ", "order ", "ships."}}
		c, err := chain.New("c").Primary(chain.Target{Name: "p", Provider: bad, Model: "m"}).
			OrProvider(chain.Target{Name: "o", Provider: good, Model: "g"}).Build()
		if err != nil {
			t.Fatal(err)
		}
		s := c.Stream(t.Context(), question)
		chunks, err := collect(t, s)
		if err != nil || texts(chunks) != "Your order ships." {
			t.Fatalf("chunks %q err %v", texts(chunks), err)
		}
		res, rerr := s.Result()
		if rerr != nil || res.Served.Target != "o" || res.Text != "Your order ships." || bad.opened != 3 {
			t.Fatalf("result %+v %v, primary opened %d times", res.Served, rerr, bad.opened)
		}
	})
}

func TestStreamFailureAfterThreeChunksEndsWithThePartialText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &streamer{stub: stub{name: "a"}, chunks: []string{"One ", "two ", "three ", "four"}, failAt: 3}
		o := &streamer{stub: stub{name: "o"}, chunks: []string{"Another answer."}}
		c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
			OrProvider(chain.Target{Name: "o", Provider: o, Model: "g"}).Build()
		s := c.Stream(t.Context(), question)
		chunks, err := collect(t, s)
		var inc *chain.IncompleteError
		if texts(chunks) != "One two three " || !errors.As(err, &inc) || inc.Partial != "One two three " ||
			llm.KindOf(err) != llm.KindOverloaded {
			t.Fatalf("chunks %q, err %v", texts(chunks), err)
		}
		if o.opened != 0 {
			t.Fatal("a second answer was started")
		}
		if _, rerr := s.Result(); !errors.Is(rerr, chain.ErrIncomplete) {
			t.Fatalf("Result error %v", rerr)
		}
	})
}

func TestStreamRestartIsVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &streamer{stub: stub{name: "a"}, chunks: []string{"One ", "two ", "three "}, failAt: 2}
		o := &streamer{stub: stub{name: "o"}, chunks: []string{"Fresh ", "answer."}}
		c, _ := chain.New("c").RestartStreams(true).Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
			OrProvider(chain.Target{Name: "o", Provider: o, Model: "g"}).Build()
		s := c.Stream(t.Context(), question)
		chunks, err := collect(t, s)
		if err != nil || texts(chunks) != "One two |RESTART|Fresh answer." {
			t.Fatalf("chunks %q, err %v", texts(chunks), err)
		}
		res, _ := s.Result()
		if res.Text != "Fresh answer." || res.Served.Target != "o" {
			t.Fatalf("result %q from %q", res.Text, res.Served.Target)
		}
	})
}

func TestStreamStallIsATimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &streamer{stub: stub{name: "a"}, chunks: []string{"One ", "two"}, stallAt: 1}
		c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: p, Model: "m", IdleTimeout: 5 * time.Second}).Build()
		start := time.Now()
		chunks, err := collect(t, c.Stream(t.Context(), question))
		if texts(chunks) != "One " || llm.KindOf(err) != llm.KindTimeout || !errors.Is(err, chain.ErrIncomplete) {
			t.Fatalf("chunks %q err %v", texts(chunks), err)
		}
		if time.Since(start) != 5*time.Second {
			t.Fatalf("stall detected after %v", time.Since(start))
		}
	})
}

func TestStreamFirstChunkTimeoutFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := &streamer{stub: stub{name: "a"}, chunks: []string{"late"}, every: time.Minute}
		o := &streamer{stub: stub{name: "o"}, chunks: []string{"on time"}}
		c, _ := chain.New("c").Primary(chain.Target{Name: "p", Provider: slow, Model: "m", FirstChunkTimeout: 2 * time.Second,
			Retry: retry.Policy{MaxAttempts: 1}}).OrProvider(chain.Target{Name: "o", Provider: o, Model: "g"}).Build()
		s := c.Stream(t.Context(), question)
		chunks, err := collect(t, s)
		res, _ := s.Result()
		if err != nil || texts(chunks) != "on time" || res.Attempts[0].Kind != llm.KindTimeout {
			t.Fatalf("chunks %q err %v attempts %v", texts(chunks), err, res.Attempts)
		}
	})
}

func TestStreamAbandonedHalfReadLeavesNothingRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &streamer{stub: stub{name: "a"}, chunks: []string{"a", "b", "c", "d"}, every: time.Second}
		c, _ := chain.New("c").Deadline(time.Minute).Primary(chain.Target{Name: "p", Provider: p, Model: "m", IdleTimeout: 10 * time.Second}).Build()
		s := c.Stream(t.Context(), question)
		for ch, err := range s.Chunks() {
			if err != nil || ch.Text == "b" {
				break
			}
		}
		res, err := s.Result()
		if !errors.Is(err, chain.ErrAbandoned) || res.Text != "ab" || res.Served.Target != "p" {
			t.Fatalf("%q from %q, %v", res.Text, res.Served.Target, err)
		}
		// synctest.Test fails if a timer goroutine or reader is left blocked.
	})
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

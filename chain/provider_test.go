package chain_test

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/backstop-llm/backstop/llm"
)

// timed is the provider the walk's tests script: it answers "ok from
// <name>" after delay (or once release is closed, when it is set), fails
// with err when set, or with a 503 before downUntil. It records the
// requests it was sent and counts those its caller canceled.
type timed struct {
	name      string
	delay     time.Duration
	release   chan struct{}
	err       error
	downUntil time.Time

	mu       sync.Mutex
	got      []llm.Request
	canceled int
}

func (p *timed) Name() string { return p.name }

func (p *timed) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	p.mu.Lock()
	p.got = append(p.got, req)
	p.mu.Unlock()
	var wait <-chan time.Time
	if p.delay > 0 {
		wait = time.After(p.delay)
	}
	if p.release != nil || wait != nil {
		select {
		case <-wait:
		case <-p.release:
		case <-ctx.Done():
			p.mu.Lock()
			p.canceled++
			p.mu.Unlock()
			return nil, &llm.Error{Provider: p.name, Kind: llm.KindCanceled, Err: ctx.Err()}
		}
	}
	switch {
	case p.err != nil:
		return nil, p.err
	case time.Now().Before(p.downUntil):
		return nil, &llm.Error{Provider: p.name, Status: 503, Kind: llm.KindOverloaded}
	}
	return &llm.Response{Text: "ok from " + p.name, Model: req.Model, RequestID: "req_" + p.name}, nil
}

// count returns how many requests p was sent.
func (p *timed) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

// sent returns the requests p was sent.
func (p *timed) sent() []llm.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]llm.Request(nil), p.got...)
}

// cancels returns how many of p's requests their caller canceled.
func (p *timed) cancels() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.canceled
}

// panicsOnce panics on its first request, then answers as timed does.
type panicsOnce struct {
	timed
	panicked atomic.Bool
}

func (p *panicsOnce) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if p.panicked.CompareAndSwap(false, true) {
		panic("provider bug")
	}
	return p.timed.Complete(ctx, req)
}

// scripted answers the nth request it is sent with script[n] (the last
// one for every request after them).
type scripted struct {
	name   string
	n      atomic.Int32
	script []func(context.Context) (*llm.Response, error)
}

func (p *scripted) Name() string { return p.name }

func (p *scripted) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	i := min(int(p.n.Add(1))-1, len(p.script)-1)
	return p.script[i](ctx)
}

func answers(ctx context.Context) (*llm.Response, error) { return &llm.Response{Text: "ok"}, nil }

func fails(context.Context) (*llm.Response, error) {
	return nil, &llm.Error{Provider: "stub", Status: 500, Kind: llm.KindServer}
}

func hangs(ctx context.Context) (*llm.Response, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

package chain_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/chain"
	"github.com/backstop-llm/backstop/internal/redistest"
	"github.com/backstop-llm/backstop/llm"
	"github.com/backstop-llm/backstop/redisstore"
	"github.com/backstop-llm/backstop/retry"
	"go.uber.org/goleak"
)

// Found in review (issue 12, item 7): remembering a served answer in a
// remote store was a write on the call's path: with Redis paused, every
// served call waited for the store's Timeout before it returned. The
// answer is now written behind the call.
func TestLastGoodRememberAddsNoLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = 50 * time.Millisecond
		store, err := redisstore.NewCache(redistest.SilentClient(t, nil), redisstore.CacheConfig{Timeout: timeout, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		c, err := chain.New("support").
			Primary(chain.Target{Name: "primary", Provider: &flaky{name: "anthropic"}, Model: "claude"}).
			OrDegrade(chain.LastGood(store)).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			start := time.Now()
			res, err := c.Call(context.Background(), ask)
			if err != nil || res.Served.Target != "primary" {
				t.Fatalf("call %d: served by %q, err %v; want the primary", i, res.Served.Target, err)
			}
			if d := time.Since(start); d != 0 {
				t.Fatalf("call %d, the provider answering at once: the call took %v of virtual time; want none (remembering must not wait on the store)", i, d)
			}
		}
		// Flush waits for the writes: the first one's Timeout (the others
		// fail at once, Redis being left alone), and says none landed.
		start := time.Now()
		err = c.Flush(context.Background())
		if d := time.Since(start); d != timeout || !errors.Is(err, cache.ErrUnavailable) || !strings.Contains(err.Error(), "3 answers were not remembered") {
			t.Fatalf("Flush = %v after %v; want, after the first write's Timeout (%v), an error matching cache.ErrUnavailable counting 3 answers", err, d, timeout)
		}
	})
}

// Flush waits for the answers written behind the calls: after it, the
// answer is in Redis, and the chain serves it when every model fails.
func TestLastGoodFlushWritesToRedis(t *testing.T) {
	m := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		client, _ := redistest.CountedClient(t, m.Addr())
		store, err := redisstore.NewCache(client, redisstore.CacheConfig{Timeout: sharedTestTimeout})
		if err != nil {
			t.Fatal(err)
		}
		p := &flaky{name: "anthropic"}
		c, err := chain.New("support").
			Primary(chain.Target{Name: "primary", Provider: p, Model: "claude", Retry: retry.Policy{MaxAttempts: 1}}).
			OrDegrade(chain.LastGood(store)).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Call(context.Background(), ask); err != nil {
			t.Fatal(err)
		}
		if err := c.Flush(context.Background()); err != nil {
			t.Fatalf("Flush: %v", err)
		}
		if keys := m.Keys(); len(keys) != 1 || !strings.HasPrefix(keys[0], "backstop:lastgood:") { // redisstore's default Prefix
			t.Fatalf("keys in Redis after Flush: %q; want the remembered answer", keys)
		}
		p.mode.Store(overloaded)
		res, err := c.Call(context.Background(), ask)
		if err != nil || !res.Degraded || res.Text != "ok from anthropic" {
			t.Fatalf("with the primary failing: %+v, %v; want the remembered answer", res, err)
		}
		if err := c.Flush(context.Background()); err != nil {
			t.Fatalf("a second Flush, nothing pending: %v", err)
		}
	})
}

// blockingStore is a cache.Store whose Set waits until released, recording
// the keys it was given, how many Sets ran at once, and what their
// contexts held when they started.
type blockingStore struct {
	started, release chan struct{}
	mu               sync.Mutex
	keys             []string
	active, most     int
	ctxs             []seenCtx
}

// seenCtx is what a Set's context held when it started.
type seenCtx struct {
	err      error
	value    any
	deadline time.Duration // from the Set's start; 0 for none
}

func (s *blockingStore) Get(context.Context, string) (cache.Entry, bool, error) {
	return cache.Entry{}, false, nil
}
func (s *blockingStore) Set(ctx context.Context, key string, _ cache.Entry, _ time.Duration) error {
	s.mu.Lock()
	s.active++
	s.most = max(s.most, s.active)
	s.keys = append(s.keys, key)
	seen := seenCtx{err: ctx.Err(), value: ctx.Value(ctxKey{})}
	if dl, ok := ctx.Deadline(); ok {
		seen.deadline = time.Until(dl)
	}
	s.ctxs = append(s.ctxs, seen)
	first := len(s.keys) == 1
	s.mu.Unlock()
	if first {
		close(s.started)
	}
	<-s.release
	s.mu.Lock()
	s.active--
	s.mu.Unlock()
	return nil
}

type ctxKey struct{}

// A store that is not in-process gets one writer per chain, in call order,
// with the call's values but not its cancellation; at most LastGoodQueue
// answers wait, the rest are dropped and counted; Flush bounded by its
// context says what is still waiting, and the writer is gone once the
// queue is empty (the bubble would not end otherwise).
func TestLastGoodWriteBehindQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &blockingStore{started: make(chan struct{}), release: make(chan struct{})}
		c, err := chain.New("support").
			Primary(chain.Target{Name: "primary", Provider: &flaky{name: "anthropic"}, Model: "claude"}).
			OrDegrade(chain.LastGood(store, chain.WithKey(func(_ string, req llm.Request) string { return req.Messages[0].Content }))).
			Build()
		if err != nil {
			t.Fatal(err)
		}
		call := func(i int) {
			t.Helper()
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, i))
			defer cancel() // the call's context ends with the call
			if _, err := c.Call(ctx, llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprint(i)}}}); err != nil {
				t.Fatal(err)
			}
		}
		call(0)
		<-store.started // the writer holds answer 0
		const extra = 43
		for i := 1; i <= chain.LastGoodQueue+extra; i++ {
			call(i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = c.Flush(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), fmt.Sprintf("%d answers were still waiting", chain.LastGoodQueue)) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%d answers were not remembered", extra)) {
			t.Fatalf("Flush with the store stuck = %v; want DeadlineExceeded, %d waiting and %d dropped", err, chain.LastGoodQueue, extra)
		}
		close(store.release)
		if err := c.Flush(context.Background()); err != nil {
			t.Fatalf("Flush once the store answers: %v", err)
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		if len(store.keys) != chain.LastGoodQueue+1 || store.most != 1 {
			t.Fatalf("the store got %d Sets, at most %d at once; want %d, one at a time", len(store.keys), store.most, chain.LastGoodQueue+1)
		}
		for i, k := range store.keys {
			if k != fmt.Sprint(i) {
				t.Fatalf("Set %d was of answer %q; want the answers in call order", i, k)
			}
			if got := store.ctxs[i]; got.err != nil || got.value != i || got.deadline != chain.DefaultDegradeTimeout {
				t.Fatalf("Set %d: ctx err %v, value %v, deadline in %v; want live, the call's value, bounded by DefaultDegradeTimeout", i, got.err, got.value, got.deadline)
			}
		}
	})
}

// The in-process store is written on the calling goroutine: the answer is
// there when the call returns, with no goroutine started.
func TestLastGoodMemoryIsSynchronous(t *testing.T) {
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 10, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	c, err := chain.New("support").
		Primary(chain.Target{Name: "primary", Provider: &flaky{name: "anthropic"}, Model: "claude"}).
		OrDegrade(chain.LastGood(store, chain.WithKey(func(string, llm.Request) string { return "k" }))).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Call(context.Background(), ask); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := store.Get(context.Background(), "k"); !ok {
		t.Fatal("the answer is not in the Memory store when the call returns")
	}
	goleak.VerifyNone(t, goleak.IgnoreCurrent())
}

// tenantChain is a chain whose primary answers with the System prompt it
// was given until down is set, then fails; LastGood remembers in a memory
// store.
func tenantChain(t *testing.T, down *bool, opts ...chain.LastGoodOption) *chain.Chain {
	t.Helper()
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 100, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	p := &stub{name: "p", fn: func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if *down {
			return nil, &llm.Error{Provider: "p", Status: 401, Kind: llm.KindAuth}
		}
		return &llm.Response{Text: "answer under " + req.System}, nil
	}}
	c, err := chain.New("support").
		Primary(chain.Target{Name: "p", Provider: p, Model: "m"}).
		OrDegrade(chain.LastGood(store, opts...)).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func askAs(system, q string) llm.Request {
	return llm.Request{System: system, Messages: []llm.Message{{Role: llm.RoleUser, Content: q}}}
}

// TestLastGoodKeyCoversTheCallersSystem: the same words under another
// System prompt (another tenant's) were served the first tenant's
// remembered answer.
func TestLastGoodKeyCoversTheCallersSystem(t *testing.T) {
	down := false
	c := tenantChain(t, &down)
	ctx := context.Background()
	if _, err := c.Call(ctx, askAs("tenant A", "refund?")); err != nil {
		t.Fatal(err)
	}
	down = true
	res, err := c.Call(ctx, askAs("tenant B", "refund?"))
	if !errors.Is(err, chain.ErrExhausted) || !errors.Is(err, chain.ErrNoLastGood) {
		t.Errorf("tenant B got %q, %v; want nothing remembered", res.Text, err)
	}
	res, err = c.Call(ctx, askAs("tenant A", "refund?"))
	if err != nil || !res.Degraded || res.Text != "answer under tenant A" {
		t.Errorf("tenant A got %q, %v; want its own remembered answer", res.Text, err)
	}
}

type tenantKey struct{}

// TestLastGoodContextKeyReadsTheContext: WithContextKey's function gets the
// call's context, when remembering and when recalling.
func TestLastGoodContextKeyReadsTheContext(t *testing.T) {
	down := false
	c := tenantChain(t, &down, chain.WithContextKey(func(ctx context.Context, name string, req llm.Request) string {
		tenant, _ := ctx.Value(tenantKey{}).(string)
		return cache.Key(name, tenant, req.Messages[0].Content)
	}))
	a := context.WithValue(context.Background(), tenantKey{}, "a")
	b := context.WithValue(context.Background(), tenantKey{}, "b")
	if _, err := c.Call(a, askAs("", "refund?")); err != nil {
		t.Fatal(err)
	}
	down = true
	if res, err := c.Call(b, askAs("", "refund?")); err == nil {
		t.Errorf("tenant b was served %q", res.Text)
	}
	if res, err := c.Call(a, askAs("", "refund?")); err != nil || !res.Degraded {
		t.Errorf("tenant a: %v", err)
	}
}

// TestLastGoodKeyCoversToolsAndAttachments: the same words with other
// tools, another image (the same URL-less bytes differ) or another tool
// result are another question; a remembered answer that called tools is
// served, calls and all, only for the same tools.
func TestLastGoodKeyCoversToolsAndAttachments(t *testing.T) {
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 100, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	down := false
	call := llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)}
	p := &stub{name: "p", fn: func(_ context.Context, req llm.Request) (*llm.Response, error) {
		if down {
			return nil, &llm.Error{Provider: "p", Status: 503, Kind: llm.KindOverloaded}
		}
		if len(req.Tools) > 0 {
			return &llm.Response{ToolCalls: []llm.ToolCall{call}, FinishReason: "tool_use"}, nil
		}
		return &llm.Response{Text: "a cat"}, nil
	}}
	c, err := chain.New("support").Primary(chain.Target{Name: "p", Provider: p, Model: "m", Retry: retry.Policy{MaxAttempts: 1}}).
		OrDegrade(chain.LastGood(store)).Build()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	image := func(b string) llm.Request {
		return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is this?", Parts: []llm.Part{llm.ImagePart("image/png", []byte(b))}}}}
	}
	tools := func(ts ...llm.Tool) llm.Request {
		return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "weather?"}}, Tools: ts}
	}
	weather := llm.Tool{Name: "get_weather", InputSchema: []byte(`{"type":"object"}`)}
	clock := llm.Tool{Name: "get_time"}
	for _, req := range []llm.Request{image("png one"), tools(weather)} {
		if _, err := c.Call(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	down = true
	for name, req := range map[string]llm.Request{
		"another image":          image("png two"),
		"no image":               {Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is this?"}}},
		"other tools":            tools(clock),
		"more tools":             tools(weather, clock),
		"another tool schema":    tools(llm.Tool{Name: "get_weather", InputSchema: []byte(`{"type":"object","required":["city"]}`)}),
		"a forced tool choice":   {Messages: tools(weather).Messages, Tools: []llm.Tool{weather}, ToolChoice: llm.UseTool("get_weather")},
		"a native schema":        {Messages: image("png one").Messages, ResponseSchema: []byte(`{"type":"object"}`)},
		"the image as a URL":     {Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is this?", Parts: []llm.Part{llm.ImageURLPart("https://example.com/a.png")}}}},
		"the text as a part too": {Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is this?", Parts: []llm.Part{llm.TextPart("png one")}}}},
	} {
		if res, err := c.Call(ctx, req); !errors.Is(err, chain.ErrNoLastGood) {
			t.Errorf("%s: served %q %v, %v; want nothing remembered", name, res.Text, res.ToolCalls, err)
		}
	}
	res, err := c.Call(ctx, image("png one"))
	if err != nil || !res.Degraded || res.Text != "a cat" {
		t.Errorf("the same image: %q %v", res.Text, err)
	}
	res, err = c.Call(ctx, tools(weather))
	if err != nil || !res.Degraded || len(res.ToolCalls) != 1 || res.ToolCalls[0].ID != "toolu_1" || res.Finish != llm.FinishToolUse {
		t.Errorf("the same tools: %+v %v", res.Response, err)
	}
}

package degrade_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/degrade"
	"github.com/backstop-llm/backstop/internal/problems"
	"github.com/backstop-llm/backstop/llm"
	"go.uber.org/goleak"
)

// bind returns the LastGood cfg configures as Build binds it to the chain
// named chain.
func bind(t *testing.T, cfg degrade.LastGoodConfig, chain string) degrade.Rememberer {
	t.Helper()
	d, err := degrade.LastGood(cfg).(degrade.Binder).Bind(chain, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := d.(degrade.Rememberer)
	if !ok || r.Name() != "last-good" {
		t.Fatalf("Bind returned %T; want a Rememberer named last-good", d)
	}
	return r
}

func memory(t *testing.T) *cache.Memory {
	t.Helper()
	store, err := cache.NewMemory(cache.MemoryConfig{MaxEntries: 100, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return store
}

func askAs(system, q string) llm.Request {
	return llm.Request{System: system, Messages: []llm.Message{{Role: llm.RoleUser, Content: q}}}
}

func TestLastGoodConfigValidate(t *testing.T) {
	var nilMemory *cache.Memory
	for name, tc := range map[string]struct {
		cfg  degrade.LastGoodConfig
		want []string
	}{
		"zero":         {degrade.LastGoodConfig{}, []string{"last-good: Store is nil; pass one"}},
		"typed nil":    {degrade.LastGoodConfig{Store: nilMemory}, []string{"Store is nil"}},
		"negative TTL": {degrade.LastGoodConfig{Store: memory(t), TTL: -time.Second}, []string{"TTL is -1s; it must not be negative (0 means the store's default)"}},
		"both":         {degrade.LastGoodConfig{TTL: -time.Minute}, []string{"Store is nil", "TTL is -1m0s"}},
	} {
		err := tc.cfg.Validate()
		if !errors.Is(err, problems.ErrInvalidConfig) {
			t.Errorf("%s: Validate = %v; want an invalid-configuration error", name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", name, err, w)
			}
		}
		if _, err := degrade.LastGood(tc.cfg).(degrade.Binder).Bind("c", nil); !errors.Is(err, problems.ErrInvalidConfig) {
			t.Errorf("%s: Bind = %v; want the configuration's problems", name, err)
		}
	}
	if err := (degrade.LastGoodConfig{Store: memory(t), MaxAge: -1}).Validate(); err != nil {
		t.Errorf("a store and no limit of age: %v", err)
	}
}

// A store that is not in-process gets one writer per chain, in call order,
// with the call's values but not its cancellation; at most lastGoodQueue
// answers wait, the rest are dropped and counted; Flush bounded by its
// context says what is still waiting, and the writer is gone once the
// queue is empty (the bubble would not end otherwise).
func TestLastGoodWriteBehindQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &blockingStore{started: make(chan struct{}), release: make(chan struct{})}
		r := bind(t, degrade.LastGoodConfig{Store: store, Key: func(_ context.Context, _ string, req llm.Request) string { return req.Messages[0].Content }}, "support")
		remember := func(i int) {
			t.Helper()
			ctx, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, i))
			defer cancel() // the call's context ends with the call
			req := llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: fmt.Sprint(i)}}}
			err := r.Remember(ctx, req, "primary", &llm.Response{Text: "ok"})
			if i <= lastGoodQueue && err != nil {
				t.Fatalf("answer %d: %v", i, err)
			}
		}
		remember(0)
		<-store.started // the writer holds answer 0
		const extra = 43
		for i := 1; i <= lastGoodQueue+extra; i++ {
			remember(i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := r.Flush(ctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), fmt.Sprintf("%d answers were still waiting", lastGoodQueue)) ||
			!strings.Contains(err.Error(), fmt.Sprintf("%d answers were not remembered", extra)) {
			t.Fatalf("Flush with the store stuck = %v; want DeadlineExceeded, %d waiting and %d dropped", err, lastGoodQueue, extra)
		}
		close(store.release)
		if err := r.Flush(context.Background()); err != nil {
			t.Fatalf("Flush once the store answers: %v", err)
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		if len(store.keys) != lastGoodQueue+1 || store.most != 1 {
			t.Fatalf("the store got %d Sets, at most %d at once; want %d, one at a time", len(store.keys), store.most, lastGoodQueue+1)
		}
		for i, k := range store.keys {
			if k != fmt.Sprint(i) {
				t.Fatalf("Set %d was of answer %q; want the answers in call order", i, k)
			}
			// 2s is the chain's DegradeTimeout default.
			if got := store.ctxs[i]; got.err != nil || got.value != i || got.deadline != 2*time.Second {
				t.Fatalf("Set %d: ctx err %v, value %v, deadline in %v; want live, the call's value, bounded by 2s", i, got.err, got.value, got.deadline)
			}
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

// The in-process store is written on the calling goroutine: the answer is
// there when Remember returns, with no goroutine started.
func TestLastGoodMemoryIsSynchronous(t *testing.T) {
	store := memory(t)
	r := bind(t, degrade.LastGoodConfig{Store: store, Key: func(context.Context, string, llm.Request) string { return "k" }}, "support")
	if err := r.Remember(context.Background(), askAs("", "hi"), "primary", &llm.Response{Text: "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := store.Get(context.Background(), "k"); !ok {
		t.Fatal("the answer is not in the Memory store when Remember returns")
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	goleak.VerifyNone(t, goleak.IgnoreCurrent())
}

// TestLastGoodKeyCoversTheCallersSystem: the same words under another
// System prompt (another tenant's) were served the first tenant's
// remembered answer.
func TestLastGoodKeyCoversTheCallersSystem(t *testing.T) {
	r := bind(t, degrade.LastGoodConfig{Store: memory(t)}, "support")
	ctx := context.Background()
	if err := r.Remember(ctx, askAs("tenant A", "refund?"), "p", &llm.Response{Text: "answer under tenant A"}); err != nil {
		t.Fatal(err)
	}
	if resp, _, err := r.Recall(ctx, askAs("tenant B", "refund?")); !errors.Is(err, degrade.ErrNoLastGood) {
		t.Errorf("tenant B got %+v, %v; want nothing remembered", resp, err)
	}
	resp, _, err := r.Recall(ctx, askAs("tenant A", "refund?"))
	if err != nil || resp.Text != "answer under tenant A" {
		t.Errorf("tenant A got %+v, %v; want its own remembered answer", resp, err)
	}
}

// One LastGood serving two chains keys each one's answers under its name:
// a chain is not served another's answer to the same words.
func TestLastGoodKeysByTheChainItIsBoundTo(t *testing.T) {
	lg := degrade.LastGood(degrade.LastGoodConfig{Store: memory(t)})
	bound := map[string]degrade.Rememberer{}
	for _, name := range []string{"support", "sales"} {
		d, err := lg.(degrade.Binder).Bind(name, nil)
		if err != nil {
			t.Fatal(err)
		}
		bound[name] = d.(degrade.Rememberer)
	}
	ctx := context.Background()
	if err := bound["support"].Remember(ctx, askAs("", "hi"), "p", &llm.Response{Text: "support's"}); err != nil {
		t.Fatal(err)
	}
	if resp, _, err := bound["sales"].Recall(ctx, askAs("", "hi")); !errors.Is(err, degrade.ErrNoLastGood) {
		t.Errorf("sales got %+v, %v; want nothing remembered", resp, err)
	}
	if resp, err := bound["support"].Degrade(ctx, askAs("", "hi")); err != nil || resp.Text != "support's" {
		t.Errorf("support got %+v, %v", resp, err)
	}
}

// An answer is served until MaxAge (24h by default), with its age; older,
// it is not (ErrLastGoodTooOld); a negative MaxAge serves any age.
func TestLastGoodMaxAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store, err := cache.NewMemory(cache.MemoryConfig{TTL: 100 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		def := bind(t, degrade.LastGoodConfig{Store: store}, "default")
		ageless := bind(t, degrade.LastGoodConfig{Store: store, MaxAge: -1}, "ageless")
		for _, r := range []degrade.Rememberer{def, ageless} {
			if err := r.Remember(ctx, askAs("", "hi"), "p", &llm.Response{Text: "then"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(defaultMaxAge)
		if resp, age, err := def.Recall(ctx, askAs("", "hi")); err != nil || resp.Text != "then" || age != defaultMaxAge {
			t.Fatalf("at MaxAge: %+v, %v, %v; want the answer, %v old", resp, age, err, defaultMaxAge)
		}
		time.Sleep(time.Second)
		if _, _, err := def.Recall(ctx, askAs("", "hi")); !errors.Is(err, degrade.ErrLastGoodTooOld) {
			t.Fatalf("past MaxAge: %v; want ErrLastGoodTooOld", err)
		}
		time.Sleep(50 * time.Hour)
		if resp, age, err := ageless.Recall(ctx, askAs("", "hi")); err != nil || resp.Text != "then" || age != 74*time.Hour+time.Second {
			t.Fatalf("no MaxAge, 74h later: %+v, %v, %v; want the answer", resp, age, err)
		}
	})
}

// TestLastGoodKeyCoversToolsAndAttachments: the same words with other
// tools, another image (the same URL-less bytes differ) or another tool
// result are another question; a remembered answer that called tools is
// served, calls and all, only for the same tools.
func TestLastGoodKeyCoversToolsAndAttachments(t *testing.T) {
	r := bind(t, degrade.LastGoodConfig{Store: memory(t)}, "support")
	call := llm.ToolCall{ID: "toolu_1", Name: "get_weather", Arguments: []byte(`{"city":"Paris"}`)}
	ctx := context.Background()
	image := func(b string) llm.Request {
		return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "what is this?", Parts: []llm.Part{llm.ImagePart("image/png", []byte(b))}}}}
	}
	tools := func(ts ...llm.Tool) llm.Request {
		return llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: "weather?"}}, Tools: ts}
	}
	weather := llm.Tool{Name: "get_weather", InputSchema: []byte(`{"type":"object"}`)}
	clock := llm.Tool{Name: "get_time"}
	if err := r.Remember(ctx, image("png one"), "p", &llm.Response{Text: "a cat"}); err != nil {
		t.Fatal(err)
	}
	if err := r.Remember(ctx, tools(weather), "p", &llm.Response{ToolCalls: []llm.ToolCall{call}, FinishReason: "tool_use"}); err != nil {
		t.Fatal(err)
	}
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
		if resp, _, err := r.Recall(ctx, req); !errors.Is(err, degrade.ErrNoLastGood) {
			t.Errorf("%s: served %+v, %v; want nothing remembered", name, resp, err)
		}
	}
	resp, _, err := r.Recall(ctx, image("png one"))
	if err != nil || resp.Text != "a cat" {
		t.Errorf("the same image: %+v %v", resp, err)
	}
	resp, _, err = r.Recall(ctx, tools(weather))
	if err != nil || len(resp.ToolCalls) != 1 || resp.ToolCalls[0].ID != "toolu_1" || resp.Finish != llm.FinishToolUse {
		t.Errorf("the same tools: %+v %v", resp, err)
	}
}

// lastGoodQueue is how many answers a LastGood on a store that is not
// in-process keeps waiting to be written, per chain (LastGood's doc).
const lastGoodQueue = 256

// defaultMaxAge is LastGoodConfig.MaxAge's default.
const defaultMaxAge = 24 * time.Hour

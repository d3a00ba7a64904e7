package chain

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/backstop-llm/backstop/cache"
	"github.com/backstop-llm/backstop/llm"
)

// Defaults of LastGood.
const (
	// DefaultLastGoodMaxAge is the oldest answer LastGood serves unless
	// WithMaxAge says otherwise.
	DefaultLastGoodMaxAge = 24 * time.Hour
	// LastGoodQueue is how many answers a LastGood on a store that is not
	// in-process keeps waiting to be written, per chain; an answer served
	// while that many wait is not remembered (Chain.Flush counts them).
	LastGoodQueue = 256
)

var (
	// ErrNoLastGood is LastGood's error when no answer is remembered for
	// the question: the chain then fails rather than invent one.
	ErrNoLastGood = errors.New("no last-known-good answer for this question")
	// ErrLastGoodTooOld is LastGood's error when the remembered answer is
	// older than its MaxAge.
	ErrLastGoodTooOld = errors.New("the last-known-good answer is older than MaxAge")
)

// LastGoodOption configures LastGood.
type LastGoodOption func(*lastGood)

// WithKey replaces the key a question is remembered under. The default is a
// hash of the chain's name and everything the caller sends that shapes the
// answer: its System prompt, its messages (roles, contents and parts:
// text, tool calls and results, images and documents by the hash of their
// bytes), its tools, tool choice and response schema; not the per-target
// prompts, so that the same question asked of any target shares
// one entry, and the same words under another System prompt (another
// tenant's, another product's) do not. Use it to key on fewer fields (a
// normalised question) or more; WithContextKey also gives the function the
// call's context (to read a tenant from it).
func WithKey(fn func(chain string, req llm.Request) string) LastGoodOption {
	return func(l *lastGood) {
		l.key = func(_ context.Context, chain string, req llm.Request) string { return fn(chain, req) }
	}
}

// WithContextKey is WithKey with the call's context, so that the key can
// hold what the context carries (a tenant, a user's locale). The context
// given is the call's, when remembering and when recalling alike.
func WithContextKey(fn func(ctx context.Context, chain string, req llm.Request) string) LastGoodOption {
	return func(l *lastGood) { l.key = fn }
}

// WithMaxAge sets the oldest remembered answer LastGood serves. 0 means
// DefaultLastGoodMaxAge (24h); a negative value means no limit.
func WithMaxAge(d time.Duration) LastGoodOption {
	return func(l *lastGood) { l.maxAge = d }
}

// WithTTL sets how long the store keeps a remembered answer. 0 means the
// store's default.
func WithTTL(d time.Duration) LastGoodOption {
	return func(l *lastGood) { l.ttl = d }
}

// LastGood returns a degradation that serves the last answer a model target
// gave to the same question, when every model target has failed now. Every
// answer a model target gives, once validated, is remembered in store; a
// remembered answer is validated again when served (the schema may have
// changed since) and served with Result.Degraded set and its age in
// Result.Age. A question never answered gets no answer from it
// (ErrNoLastGood): the chain fails with ErrExhausted rather than invent one.
// It is named "last-good".
//
// Remembering never adds latency to a call. A *cache.Memory is written on
// the calling goroutine (it costs well under a microsecond). Any other store
// (redisstore.Cache, or one of your own) is written behind the call: the
// answer is queued, and one goroutine per chain writes the queue in order,
// each write with the call's context values but not its cancellation or
// deadline, bounded by the store's own Timeout (a cache.Bounded such as
// redisstore.Cache) or, for a store of another kind, by
// DefaultDegradeTimeout. The goroutine exits as
// soon as the queue is empty. At most LastGoodQueue answers wait; an answer
// served while the queue is full is not remembered. Call Chain.Flush before
// a replica stops: it waits for the answers still waiting, so that none is
// lost, and reports those that were not remembered.
func LastGood(store cache.Store, opts ...LastGoodOption) Degradation {
	l := &lastGood{store: store}
	for _, o := range opts {
		o(l)
	}
	if l.maxAge == 0 {
		l.maxAge = DefaultLastGoodMaxAge
	}
	return l
}

type lastGood struct {
	store  cache.Store
	key    func(ctx context.Context, chain string, req llm.Request) string
	maxAge time.Duration
	ttl    time.Duration
	chain  string // set on the copy Build binds to a chain
	// behind writes the answers of the copy bound to a chain, unless its
	// store is in-process (nil: remember writes on the calling goroutine).
	behind *writeBehind
}

func (*lastGood) Name() string { return "last-good" }

// bind returns a copy of l for the chain named name, with a write-behind
// of its own unless the store is in-process.
func (l *lastGood) bind(name string) *lastGood {
	c := *l
	c.chain = name
	c.behind = nil
	switch s := l.store.(type) {
	case *cache.Memory:
	case cache.Bounded:
		c.behind = &writeBehind{store: s} // each Set bounded by the store's Timeout
	default:
		c.behind = &writeBehind{store: s, bound: DefaultDegradeTimeout}
	}
	return &c
}

// keyOf is the key req is remembered under; see WithKey.
func (l *lastGood) keyOf(ctx context.Context, req llm.Request) string {
	if l.key != nil {
		return l.key(ctx, l.chain, req)
	}
	return cache.Key(keyParts(l.chain, &req)...)
}

// keyParts lists everything in req that shapes the answer, after the
// chain's name: the System prompt, each message's role, content and parts
// (media by the SHA-256 of their bytes, not by URL alone), the tools, the
// tool choice and the response schema. A text-only conversation's parts are
// the same as in version "v2", so its remembered answers stay valid; "v3"
// marks a request that carries more.
func keyParts(chain string, req *llm.Request) []string {
	version := "v2" // the System prompt is part of the key since v2
	if rich(req) {
		version = "v3"
	}
	parts := make([]string, 0, 3+2*len(req.Messages))
	parts = append(parts, chain, version, req.System)
	for i := range req.Messages {
		m := &req.Messages[i]
		parts = append(parts, string(m.Role), m.Content)
		if version == "v2" {
			continue
		}
		parts = append(parts, strconv.Itoa(len(m.Parts)))
		for _, p := range m.Parts {
			parts = appendPart(parts, &p)
		}
	}
	if version == "v2" {
		return parts
	}
	parts = append(parts, "tools", strconv.Itoa(len(req.Tools)))
	for _, t := range req.Tools {
		parts = append(parts, t.Name, t.Description, string(t.InputSchema))
	}
	return append(parts, req.ToolChoice.Mode.String(), req.ToolChoice.Name, string(req.ResponseSchema))
}

// rich reports whether req carries more than text.
func rich(req *llm.Request) bool {
	if len(req.Tools) > 0 || req.ToolChoice != (llm.ToolChoice{}) || len(req.ResponseSchema) > 0 {
		return true
	}
	for i := range req.Messages {
		if len(req.Messages[i].Parts) > 0 {
			return true
		}
	}
	return false
}

// appendPart appends the key parts of p: its kind, then what it holds.
func appendPart(parts []string, p *llm.Part) []string {
	switch {
	case p.Media != nil:
		sum := sha256.Sum256(p.Media.Data)
		return append(parts, "media", p.Media.MediaType, p.Media.URL, string(sum[:]))
	case p.ToolCall != nil:
		return append(parts, "call", p.ToolCall.ID, p.ToolCall.Name, string(p.ToolCall.Arguments))
	case p.ToolResult != nil:
		return append(parts, "result", p.ToolResult.CallID, p.ToolResult.Content, strconv.FormatBool(p.ToolResult.IsError))
	}
	return append(parts, "text", p.Text)
}

// remembered is what LastGood stores: enough to serve the answer again and
// to say where it came from.
type remembered struct {
	Text         string    `json:"text"`
	Model        string    `json:"model,omitempty"`
	ID           string    `json:"id,omitempty"`
	RequestID    string    `json:"request_id,omitempty"`
	FinishReason string    `json:"finish_reason,omitempty"`
	Usage        llm.Usage `json:"usage"`
	Target       string    `json:"target,omitempty"`
	// ToolCalls are the answer's tool calls; the key covers the request's
	// tools, so they are served only for the same tools.
	ToolCalls []llm.ToolCall `json:"tool_calls,omitempty"`
}

// remember stores resp, served by target, as the answer to req: at once
// for an in-process store, otherwise through the write-behind, without
// waiting (see LastGood). req and resp are read before it returns.
func (l *lastGood) remember(ctx context.Context, req llm.Request, target string, resp *llm.Response) error {
	v, err := json.Marshal(remembered{Text: resp.Text, Model: resp.Model, ID: resp.ID, RequestID: resp.RequestID,
		FinishReason: resp.FinishReason, Usage: resp.Usage, Target: target, ToolCalls: resp.ToolCalls})
	if err != nil {
		return err
	}
	e := cache.Entry{Value: v, Stored: time.Now()}
	if l.behind == nil {
		return l.store.Set(ctx, l.keyOf(ctx, req), e, l.ttl)
	}
	return l.behind.add(ctx, l.keyOf(ctx, req), e, l.ttl)
}

// flush waits, until ctx ends, for the answers remembered before it was
// called to be written, and reports those that were not remembered since
// the last flush: dropped (the queue was full) or failed (the store's
// error), and those still waiting when ctx ended.
func (l *lastGood) flush(ctx context.Context) error {
	if l.behind == nil {
		return nil
	}
	return l.behind.flush(ctx)
}

// writeBehind writes a LastGood's answers to its store on a goroutine of
// its own, in order: at most one, started by the first answer queued and
// gone as soon as the queue is empty.
type writeBehind struct {
	store cache.Store
	bound time.Duration // bounds each Set; 0 when the store bounds its own

	mu      sync.Mutex
	queue   []pending // queue[head:] waits, oldest first
	head    int
	waiting int  // answers in the queue (not barriers), at most LastGoodQueue
	running bool // the writer runs: the queue is not empty, or a Set is on its way

	// Since the last flush: answers dropped with the queue full, answers
	// the store failed to take, and its last error.
	dropped, failed int
	lastErr         error
}

// pending is an answer to write, or a flush's barrier (done set), closed
// when the writer reaches it.
type pending struct {
	ctx   context.Context // the call's values, without its cancellation
	key   string
	entry cache.Entry
	ttl   time.Duration
	done  chan struct{}
}

// errQueueFull is remember's error for an answer dropped with the queue
// full.
var errQueueFull = fmt.Errorf("last-known-good: %d answers are waiting for the store already; this one is not remembered", LastGoodQueue)

// add queues an answer and starts the writer if none runs.
func (w *writeBehind) add(ctx context.Context, key string, e cache.Entry, ttl time.Duration) error {
	w.mu.Lock()
	if w.waiting >= LastGoodQueue {
		w.dropped++
		w.mu.Unlock()
		return errQueueFull
	}
	w.queue = append(w.queue, pending{ctx: context.WithoutCancel(ctx), key: key, entry: e, ttl: ttl})
	w.waiting++
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go w.run()
	}
	return nil
}

// run writes the queue until it is empty, then returns.
func (w *writeBehind) run() {
	for {
		w.mu.Lock()
		if w.head == len(w.queue) {
			w.queue, w.head = w.queue[:0], 0 // keep the array for the next burst
			w.running = false
			w.mu.Unlock()
			return
		}
		p := w.queue[w.head]
		w.queue[w.head] = pending{} // let the answer go once written
		w.head++
		if p.done == nil {
			w.waiting--
		}
		w.mu.Unlock()
		if p.done != nil {
			close(p.done)
			continue
		}
		ctx, cancel := p.ctx, context.CancelFunc(nil)
		if w.bound > 0 {
			ctx, cancel = context.WithTimeout(ctx, w.bound)
		}
		err := w.store.Set(ctx, p.key, p.entry, p.ttl)
		if cancel != nil {
			cancel()
		}
		if err != nil {
			w.mu.Lock()
			w.failed++
			w.lastErr = err
			w.mu.Unlock()
		}
	}
}

// flush is lastGood.flush.
func (w *writeBehind) flush(ctx context.Context) error {
	w.mu.Lock()
	var done chan struct{}
	if w.running {
		done = make(chan struct{})
		w.queue = append(w.queue, pending{done: done})
	}
	w.mu.Unlock()
	var errs []error
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			w.mu.Lock()
			n := w.waiting
			w.mu.Unlock()
			errs = append(errs, fmt.Errorf("last-known-good: %d answers were still waiting for the store: %w", n, ctx.Err()))
		}
	}
	w.mu.Lock()
	dropped, failed, lastErr := w.dropped, w.failed, w.lastErr
	w.dropped, w.failed, w.lastErr = 0, 0, nil
	w.mu.Unlock()
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("last-known-good: %d answers were not remembered: %d were waiting for the store already (LastGoodQueue); a faster store, or a Timeout that fails sooner, keeps up", dropped, LastGoodQueue))
	}
	if failed > 0 {
		errs = append(errs, fmt.Errorf("last-known-good: %d answers were not remembered; the store's last error: %w", failed, lastErr))
	}
	return errors.Join(errs...)
}

// Degrade serves the remembered answer to req, if any and young enough.
func (l *lastGood) Degrade(ctx context.Context, req llm.Request) (*llm.Response, error) {
	resp, _, err := l.recall(ctx, req)
	return resp, err
}

// recall returns the remembered answer to req and its age.
func (l *lastGood) recall(ctx context.Context, req llm.Request) (*llm.Response, time.Duration, error) {
	e, ok, err := l.store.Get(ctx, l.keyOf(ctx, req))
	switch {
	case err != nil:
		return nil, 0, fmt.Errorf("reading the last-known-good store: %w", err)
	case !ok:
		return nil, 0, ErrNoLastGood
	}
	age := time.Since(e.Stored)
	if l.maxAge > 0 && age > l.maxAge {
		return nil, age, fmt.Errorf("%w (%v > %v)", ErrLastGoodTooOld, age.Round(time.Second), l.maxAge)
	}
	var r remembered
	if err := json.Unmarshal(e.Value, &r); err != nil {
		return nil, age, fmt.Errorf("the remembered answer is not readable: %w", err)
	}
	return &llm.Response{Text: r.Text, Model: r.Model, ID: r.ID, RequestID: r.RequestID,
		FinishReason: r.FinishReason, Finish: llm.FinishOf(r.FinishReason), Usage: r.Usage, ToolCalls: r.ToolCalls}, age, nil
}
